package render

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodegroup-io/nodegroup-operator/internal/providers/capk"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/kairos"
	"github.com/nodegroup-io/nodegroup-operator/internal/providers/talos"
)

// checkSpecJSON requires the hand-written encoding of a spec to be encoding/json's, and
// contentHash to be the hash of encoding/json's bytes, as it was before the writers.
func checkSpecJSON(t *testing.T, spec any) {
	t.Helper()
	want, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	got, err := appendSpecJSON(nil, spec)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%T: hand-written JSON differs from encoding/json:\n got %s\nwant %s", spec, got, want)
	}
	sum := sha256.Sum256(append([]byte(HashVersion+"\x00"), want...))
	hash, err := contentHash(spec)
	if err != nil {
		t.Fatal(err)
	}
	if wantHash := hex.EncodeToString(sum[:])[:contentHashLen]; hash != wantHash {
		t.Fatalf("%T: contentHash = %s, want %s", spec, hash, wantHash)
	}
}

// TestSpecJSONGolden: every template of every golden case.
func TestSpecJSONGolden(t *testing.T) {
	for name, in := range goldenCases(t) {
		out, err := Render(in)
		if err != nil {
			continue // the refused cases
		}
		t.Run(name, func(t *testing.T) {
			checkSpecJSON(t, &out.Infrastructure.Spec)
			switch b := out.Bootstrap.(type) {
			case *talos.TalosConfigTemplate:
				checkSpecJSON(t, &b.Spec)
			case *kairos.KairosConfigTemplate:
				checkSpecJSON(t, &b.Spec)
			default:
				t.Fatalf("bootstrap is a %T", b)
			}
		})
	}
}

// TestSpecJSONEveryField fills every field of each spec type by reflection, so a field a
// provider type gains, and specjson.go does not write, fails here. Each spec is checked
// full, with its strings, numbers and booleans empty (for omitempty inside present
// structs), and zero.
func TestSpecJSONEveryField(t *testing.T) {
	for _, spec := range []any{&talos.TalosConfigTemplateSpec{}, &kairos.KairosConfigTemplateSpec{}, &capk.KubevirtMachineTemplateSpec{}} {
		typ := reflect.TypeOf(spec).Elem()
		t.Run(typ.Name(), func(t *testing.T) {
			checkSpecJSON(t, spec)
			for _, leaves := range []bool{false, true} {
				v := reflect.New(typ)
				fillValue(v.Elem(), leaves)
				checkSpecJSON(t, v.Interface())
			}
		})
	}
}

var quantityType = reflect.TypeFor[resource.Quantity]()

// fillValue sets every field of v: two elements in each slice and map, every pointer
// set; strings, numbers and booleans non-zero, or zero when emptyLeaves.
func fillValue(v reflect.Value, emptyLeaves bool) {
	switch {
	case v.Type() == quantityType:
		v.Set(reflect.ValueOf(resource.MustParse("1536Mi")))
		return
	case emptyLeaves && v.Kind() != reflect.Pointer && v.Kind() != reflect.Slice &&
		v.Kind() != reflect.Map && v.Kind() != reflect.Struct:
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(`a "b" <c> & d\e` + "\n\t\u2028é")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Uint32, reflect.Uint64, reflect.Uint:
		v.SetUint(7)
	case reflect.Int32, reflect.Int64, reflect.Int:
		v.SetInt(-7)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fillValue(v.Elem(), emptyLeaves)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		for i := range 2 {
			fillValue(v.Index(i), emptyLeaves)
		}
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		for _, k := range []string{"b", "a<&"} {
			e := reflect.New(v.Type().Elem()).Elem()
			fillValue(e, emptyLeaves)
			v.SetMapIndex(reflect.ValueOf(k), e)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fillValue(v.Field(i), emptyLeaves)
			}
		}
	default:
		panic("fillValue: add " + v.Kind().String())
	}
}

// TestJSONStringMatchesEncodingJSON covers the escaping on its own: every byte, in
// every position of a word, and random strings.
func TestJSONStringMatchesEncodingJSON(t *testing.T) {
	check := func(s string) {
		t.Helper()
		want, _ := json.Marshal(s)
		if got := appendJSONString([]byte("x"), s); string(got) != "x"+string(want) {
			t.Fatalf("appendJSONString(%q) = %s, want %s", s, got[1:], want)
		}
	}
	for _, s := range append([]string{"", "plain", strings.Repeat("abcdefgh", 9)}, hostileStrings...) {
		check(s)
	}
	for c := range 256 {
		for pos := range 17 {
			check(strings.Repeat("a", pos) + string(rune(c)) + strings.Repeat("b", 16-pos))
			check(strings.Repeat("a", pos) + string([]byte{byte(c)}) + strings.Repeat("b", 16-pos))
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	const alphabet = "abcXYZ019 \"\\<>&\n\t\x00\x1f\x7f\x80é\u2028"
	for range 20000 {
		var b strings.Builder
		for range r.IntN(40) {
			if r.IntN(4) == 0 {
				b.WriteString(alphabet[r.IntN(len(alphabet)):][:1])
			} else {
				b.WriteByte(byte('a' + r.IntN(26)))
			}
		}
		check(b.String())
	}
}
