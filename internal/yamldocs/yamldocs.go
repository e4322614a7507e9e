// Package yamldocs reads multi-document YAML streams into objects. Documents are split
// by apimachinery's YAML reader, which cuts only at a "---" line, so a "---" inside a
// value (a PEM block, a script) never splits a document.
package yamldocs

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Objects decodes every document of data, skipping empty ones (only comments, or
// nothing between two separators). An error names the document, counted from 1.
func Objects(data []byte) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for i := 1; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		// As the API server reads a body: whole numbers as int64, which the CRD's
		// schema calls integers.
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		obj := &unstructured.Unstructured{}
		if err := utiljson.Unmarshal(js, &obj.Object); err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if len(obj.Object) > 0 {
			objs = append(objs, obj)
		}
	}
}
