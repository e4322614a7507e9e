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
// zero, and in every fillMode: each slice holds a filled element and a zero one (for
// nil pointers, nil maps and nil slices inside present structs), and in the shallow
// modes every pointer is set to a zero value and every slice and map is empty but not
// nil (for omitempty on empty values that encoding/json drops but a nil check keeps).
func TestSpecJSONEveryField(t *testing.T) {
	for _, spec := range []any{&talos.TalosConfigTemplateSpec{}, &kairos.KairosConfigTemplateSpec{}, &capk.KubevirtMachineTemplateSpec{}} {
		typ := reflect.TypeOf(spec).Elem()
		t.Run(typ.Name(), func(t *testing.T) {
			checkSpecJSON(t, spec)
			for _, mode := range []fillMode{fillFull, fillEmptyLeaves, fillShallow, fillShallow | fillEmptyLeaves} {
				v := reflect.New(typ)
				fillValue(v.Elem(), mode)
				checkSpecJSON(t, v.Interface())
			}
		})
	}
}

var quantityType = reflect.TypeFor[resource.Quantity]()

// fillMode says how fillValue fills: fillFull sets strings, numbers and booleans
// non-zero, fillEmptyLeaves leaves them zero, and fillShallow sets each pointer to a
// zero value it does not fill further and each slice and map empty but not nil.
type fillMode uint8

const fillFull fillMode = 0

const (
	fillEmptyLeaves fillMode = 1 << iota
	fillShallow
)

// fillValue sets every field of v by mode. Unless fillShallow, each slice gets a filled
// element and a zero one, each map a filled entry and a zero one, each pointer a filled
// value.
func fillValue(v reflect.Value, mode fillMode) {
	switch {
	case v.Type() == quantityType:
		v.Set(reflect.ValueOf(resource.MustParse("1536Mi")))
		return
	case mode&fillEmptyLeaves != 0 && v.Kind() != reflect.Pointer && v.Kind() != reflect.Slice &&
		v.Kind() != reflect.Map && v.Kind() != reflect.Struct:
		return
	}
	shallow := mode&fillShallow != 0
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
		if !shallow {
			fillValue(v.Elem(), mode)
		}
	case reflect.Slice:
		if shallow {
			v.Set(reflect.MakeSlice(v.Type(), 0, 0))
			return
		}
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		fillValue(v.Index(0), mode) // v.Index(1) stays zero
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		if shallow {
			return
		}
		for i, k := range []string{"b", "a<&"} {
			e := reflect.New(v.Type().Elem()).Elem()
			if i == 0 {
				fillValue(e, mode)
			}
			v.SetMapIndex(reflect.ValueOf(k), e)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fillValue(v.Field(i), mode)
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
