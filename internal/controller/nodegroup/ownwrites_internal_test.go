package nodegroup

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/nodegroup-io/nodegroup-operator/api/v1alpha1"
)

func poolAt(rv string) *v1.NodeGroup {
	return &v1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: "web", ResourceVersion: rv}}
}

// TestOwnWritesBehind: a copy older than the last write is behind until the cache
// holds that write or a later one; then the write is forgotten. The wait grows with
// the time the write has been out, within its bounds.
func TestOwnWritesBehind(t *testing.T) {
	var w ownWrites
	if _, behind := w.behind(poolAt("9")); behind {
		t.Fatal("a pool never written is behind")
	}
	w.wrote(poolAt("10"))
	wait, behind := w.behind(poolAt("9"))
	if !behind || wait != minCacheLagDelay {
		t.Fatalf("copy 9 after write 10: behind %v, wait %v; want behind, wait %v", behind, wait, minCacheLagDelay)
	}
	// A version of another length still compares as a number.
	if _, behind := w.behind(poolAt("101")); behind {
		t.Fatal("copy 101 after write 10 is behind")
	}
	if _, behind := w.behind(poolAt("9")); behind {
		t.Fatal("the write was not forgotten once the cache held a later version")
	}

	w.wrote(poolAt("20"))
	key := types.NamespacedName{Namespace: "t", Name: "web"}
	w.w[key] = write{rv: "20", at: time.Now().Add(-time.Second)}
	if wait, _ := w.behind(poolAt("19")); wait < time.Second || wait >= maxCacheLagDelay {
		t.Errorf("a write out for a second: wait %v, want about a second", wait)
	}
	w.w[key] = write{rv: "20", at: time.Now().Add(-maxCacheLag / 2)}
	if wait, _ := w.behind(poolAt("19")); wait != maxCacheLagDelay {
		t.Errorf("a write out for half a minute: wait %v, want %v", wait, maxCacheLagDelay)
	}
	// A cache that does not catch up (versions that went back) holds the pool no longer
	// than maxCacheLag: the write is forgotten.
	w.w[key] = write{rv: "20", at: time.Now().Add(-maxCacheLag)}
	if _, behind := w.behind(poolAt("19")); behind {
		t.Error("a write out for longer than maxCacheLag still holds the pool")
	}
	if _, behind := w.behind(poolAt("19")); behind {
		t.Error("the write out for too long was not forgotten")
	}
	w.wrote(poolAt("20"))

	// A version that is not a number is taken as caught up, and forgets the write.
	if _, behind := w.behind(poolAt("x")); behind {
		t.Error("an opaque version is behind")
	}
	if len(w.w) != 0 {
		t.Errorf("writes kept: %v", w.w)
	}

	w.wrote(poolAt("30"))
	w.forget(key)
	if _, behind := w.behind(poolAt("29")); behind {
		t.Error("a forgotten pool is behind")
	}
}
