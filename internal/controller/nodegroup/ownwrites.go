package nodegroup

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A pool whose cached copy is older than the operator's own last write of it is looked
// at again after as long as the write has been out, from minCacheLagDelay (a watch
// brings a write back within milliseconds on an idle API server) to maxCacheLagDelay
// (a watch that does not bring it back for long, as when the API server is away,
// costs a cache read every few seconds per pool, not a loop).
//
// A write the cache has not shown after maxCacheLag is forgotten and the reconcile goes
// on with the copy it has: the worst that costs is one conflict, where waiting longer
// could hold a pool for good (resourceVersions that went back, as after a restore of
// etcd from a snapshot, would never catch up).
const (
	minCacheLagDelay = 100 * time.Millisecond
	maxCacheLagDelay = 5 * time.Second
	maxCacheLag      = time.Minute
)

// ownWrites remembers, for each pool, the resourceVersion the operator's last write of
// it (the finalizer, the status) left, until the cache holds that version or a later
// one.
//
// A pool's watch lets through changes of generation and labels only, so the status
// the operator writes does not bring the pool back: its next reconcile comes from
// something else, its MachineDeployment scaled for one, and can begin before the write
// has come back through the watch. A status computed from that older copy is refused
// with a conflict (the status patch carries the version it read): a write wasted on an
// API server that is likely busy, since that is when the watch lags, and one that more
// workers make more frequent. A reconcile that finds its copy behind waits for the
// cache instead (Reconcile requeues it), which costs no request.
//
// controller-runtime's client has an experimental option for this
// (EnableReadYourWritesConsistency). It covers every write of every kind, and then
// makes reads of a kind wait for the cache to hold the newest version written, which
// a label-filtered cache may never receive (an object written without the label it
// selects); it also holds the worker while it waits. The pool is the one object whose
// stale copy costs a write here, so only its versions are kept.
type ownWrites struct {
	mu sync.Mutex
	w  map[types.NamespacedName]write
}

// write is the version a write left, and when.
type write struct {
	rv string
	at time.Time
}

// wrote records the version obj has after the operator wrote it.
func (w *ownWrites) wrote(obj client.Object) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.w == nil {
		w.w = map[types.NamespacedName]write{}
	}
	w.w[client.ObjectKeyFromObject(obj)] = write{rv: obj.GetResourceVersion(), at: time.Now()}
}

// behind says whether cached, a pool as the cache holds it, is older than the
// operator's last write of it, and if so how long to wait before looking again. Once
// the cache has caught up the write is forgotten, so the map holds only pools whose
// writes the cache has not shown to a reconcile yet. A version that does not compare
// (not an etcd revision), and a write out for longer than maxCacheLag, are taken as
// caught up.
func (w *ownWrites) behind(cached client.Object) (time.Duration, bool) {
	key := client.ObjectKeyFromObject(cached)
	w.mu.Lock()
	defer w.mu.Unlock()
	written, ok := w.w[key]
	if !ok {
		return 0, false
	}
	out := time.Since(written.at)
	if c, err := resourceversion.CompareResourceVersion(cached.GetResourceVersion(), written.rv); err == nil && c < 0 && out < maxCacheLag {
		return min(max(out, minCacheLagDelay), maxCacheLagDelay), true
	}
	delete(w.w, key)
	return 0, false
}

// forget drops what is known of a pool that is gone.
func (w *ownWrites) forget(key types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.w, key)
}
