package release

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
)

// PackagedChart is a chart archive a release made.
type PackagedChart struct {
	Name       string `json:"name"`
	Version    string `json:"version"`
	AppVersion string `json:"appVersion"`
	// File is the archive's path relative to the release folder.
	File string `json:"file"`
}

// ImageRef is the operator image a chart is packaged to run.
type ImageRef struct {
	Repository string
	Digest     string
}

// PackageCharts packages every chart under dir (a folder with a Chart.yaml) with the Helm
// SDK into out, as chartutil.Save does for `helm package`: version and appVersion are
// chartVersion, and a chart whose values name the image (image.repository and
// image.digest) gets img's repository and digest written into its values.yaml, in place,
// comments and all. A dependency on a chart of the same folder (file://) is packaged
// inside the chart at the same version.
func PackageCharts(dir, chartVersion string, img ImageRef, out string) ([]PackagedChart, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var made []PackagedChart
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		if _, err := os.Stat(filepath.Join(path, chartutil.ChartfileName)); err != nil {
			continue
		}
		ch, err := loadForRelease(path, chartVersion, img)
		if err != nil {
			return nil, fmt.Errorf("chart %s: %w", e.Name(), err)
		}
		file, err := chartutil.Save(ch, out)
		if err != nil {
			return nil, fmt.Errorf("packaging chart %s: %w", e.Name(), err)
		}
		made = append(made, PackagedChart{Name: ch.Name(), Version: ch.Metadata.Version, AppVersion: ch.Metadata.AppVersion, File: file})
	}
	if len(made) == 0 {
		return nil, fmt.Errorf("no chart under %s", dir)
	}
	return made, nil
}

func loadForRelease(path, chartVersion string, img ImageRef) (*chart.Chart, error) {
	ch, err := loader.Load(path)
	if err != nil {
		return nil, err
	}
	ch.Metadata.Version, ch.Metadata.AppVersion = chartVersion, chartVersion
	if err := setImage(ch, img); err != nil {
		return nil, err
	}
	for _, dep := range ch.Metadata.Dependencies {
		local, ok := strings.CutPrefix(dep.Repository, "file://")
		if !ok {
			continue
		}
		sub, err := loadForRelease(filepath.Join(path, local), chartVersion, img)
		if err != nil {
			return nil, fmt.Errorf("dependency %s: %w", dep.Name, err)
		}
		dep.Version = chartVersion
		// A dependency vendored under charts/ (helm dependency build) is replaced by
		// the release's build of it.
		var kept []*chart.Chart
		for _, d := range ch.Dependencies() {
			if d.Name() != sub.Name() {
				kept = append(kept, d)
			}
		}
		ch.SetDependencies(append(kept, sub)...)
		ch.Lock = nil // its digest no longer matches the dependencies
	}
	return ch, nil
}

// setImage writes the image's repository and digest into a chart's values.yaml when its
// values have both keys under image, replacing only the two scalars in the file, so
// `helm show values` shows the file as written. yaml.v3 finds the two scalars; its
// encoder would keep the comments but not the file: re-encoding the operator chart's
// values.yaml drops 27 of its 360 lines (the blank ones between sections). The result
// is read back with Helm's own reader and checked (below).
func setImage(ch *chart.Chart, img ImageRef) error {
	for _, f := range ch.Raw {
		if f.Name != chartutil.ValuesfileName {
			continue
		}
		var doc yaml.Node
		if err := yaml.Unmarshal(f.Data, &doc); err != nil {
			return err
		}
		image := mappingValue(doc.Content, "image")
		repo, digest := mappingValue(image, "repository"), mappingValue(image, "digest")
		if repo == nil || digest == nil {
			return nil
		}
		data, err := replaceScalars(f.Data, map[*yaml.Node]string{repo[0]: img.Repository, digest[0]: img.Digest})
		if err != nil {
			return err
		}
		vals, err := chartutil.ReadValues(data)
		if err != nil {
			return err
		}
		if got, _ := vals.PathValue("image.digest"); got != img.Digest {
			return fmt.Errorf("values.yaml: image.digest is %v after writing %s", got, img.Digest)
		}
		f.Data, ch.Values = data, vals
		return nil
	}
	return nil
}

// mappingValue returns, as a one-element slice, the value node of key in the mapping
// held by nodes (a document's or a mapping value's content), or nil.
func mappingValue(nodes []*yaml.Node, key string) []*yaml.Node {
	if len(nodes) != 1 {
		return nil
	}
	m := nodes[0]
	if m.Kind == yaml.DocumentNode && len(m.Content) == 1 {
		m = m.Content[0]
	}
	if m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1 : i+2]
		}
	}
	return nil
}

// replaceScalars replaces each scalar node's text in data (found by its line and column)
// with a double-quoted value.
func replaceScalars(data []byte, values map[*yaml.Node]string) ([]byte, error) {
	lines := bytes.SplitAfter(data, []byte("\n"))
	for n, v := range values {
		if n.Kind != yaml.ScalarNode || n.Line < 1 || n.Line > len(lines) {
			return nil, fmt.Errorf("values.yaml line %d: not a scalar", n.Line)
		}
		line := lines[n.Line-1]
		start := n.Column - 1
		end, err := scalarEnd(line, start, n)
		if err != nil {
			return nil, fmt.Errorf("values.yaml line %d: %w", n.Line, err)
		}
		lines[n.Line-1] = append(append(append([]byte{}, line[:start]...), strconv.Quote(v)...), line[end:]...)
	}
	return bytes.Join(lines, nil), nil
}

// scalarEnd is where the one-line scalar n, starting at start of line, ends.
func scalarEnd(line []byte, start int, n *yaml.Node) (int, error) {
	switch n.Style {
	case yaml.DoubleQuotedStyle, yaml.SingleQuotedStyle:
		q := line[start]
		for i := start + 1; i < len(line); i++ {
			if line[i] == '\\' && q == '"' {
				i++
				continue
			}
			if line[i] == q {
				return i + 1, nil
			}
		}
		return 0, fmt.Errorf("unterminated quoted scalar")
	case 0:
		if !bytes.HasPrefix(line[start:], []byte(n.Value)) {
			return 0, fmt.Errorf("plain scalar %q is not on one line", n.Value)
		}
		return start + len(n.Value), nil
	}
	return 0, fmt.Errorf("scalar style %v is not supported", n.Style)
}
