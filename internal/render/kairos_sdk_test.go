package render

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/kairos-io/kairos-sdk/schema"
	"sigs.k8s.io/yaml"

	"github.com/nodegroup-io/nodegroup-operator/internal/providers/kairos"
)

// The Kairos bootstrap provider turns a KairosConfig into a "#cloud-config" document that
// the kairos-agent hands to yip on the machine. The parts of that document that come from
// what we render are:
//
//	#cloud-config
//	users:
//	- name: <spec.userName>
//	  passwd: <the value of spec.userPasswordSecretRef>  # or, with spec.sshPublicKey:
//	  ssh_authorized_keys: [<spec.sshPublicKey>]
//	write_files:                                          # spec.files, one entry each
//	- path: <path>
//	  content: <content>
//	  owner: <owner>
//	  permissions: <permissions>
//	stages:
//	  boot:
//	  - name: Configure DNS resolvers for early boot     # when spec.dnsServers is set
//	    dns:
//	      nameservers: <spec.dnsServers>
//	      path: /etc/resolv.conf
//
// The provider adds its own keys (its user groups, the kubeadm join, its own files and
// stages); they are its business and are not rebuilt here. The Secret's password is
// never in the template, so a placeholder stands in for it.

// sdkCloudConfig is the cloud-config built from our parts, in the provider's layout.
type sdkCloudConfig struct {
	Users      []sdkUser      `json:"users"`
	WriteFiles []sdkWriteFile `json:"write_files,omitempty"`
	Stages     *sdkStages     `json:"stages,omitempty"`
}

type sdkUser struct {
	Name              string   `json:"name"`
	Passwd            string   `json:"passwd,omitempty"`
	SSHAuthorizedKeys []string `json:"ssh_authorized_keys,omitempty"`
}

type sdkWriteFile struct {
	Path        string `json:"path"`
	Content     string `json:"content"`
	Owner       string `json:"owner,omitempty"`
	Permissions string `json:"permissions,omitempty"`
}

type sdkStages struct {
	Boot []sdkStage `json:"boot"`
}

type sdkStage struct {
	Name string `json:"name"`
	DNS  sdkDNS `json:"dns"`
}

type sdkDNS struct {
	Nameservers []string `json:"nameservers"`
	Path        string   `json:"path"`
}

const sdkPlaceholderPassword = "placeholder-password-from-secret"

// sdkDocument builds the cloud-config the provider would write from our parts.
func sdkDocument(t *testing.T, spec kairos.KairosConfigSpec) string {
	t.Helper()
	user := sdkUser{Name: spec.UserName}
	switch {
	case spec.SSHPublicKey != "":
		user.SSHAuthorizedKeys = []string{spec.SSHPublicKey}
	case spec.UserPasswordSecretRef != nil:
		user.Passwd = sdkPlaceholderPassword
	default:
		t.Fatal("the template has no user credential")
	}
	cc := sdkCloudConfig{Users: []sdkUser{user}}
	for _, f := range spec.Files {
		cc.WriteFiles = append(cc.WriteFiles, sdkWriteFile(f))
	}
	if len(spec.DNSServers) > 0 {
		cc.Stages = &sdkStages{Boot: []sdkStage{{Name: "Configure DNS resolvers for early boot",
			DNS: sdkDNS{Nameservers: spec.DNSServers, Path: "/etc/resolv.conf"}}}}
	}
	b, err := yaml.Marshal(cc)
	if err != nil {
		t.Fatal(err)
	}
	return "#cloud-config\n" + string(b)
}

// kairos-sdk's RootSchema (v0.11.0) describes users, install, p2p, bundles and the like,
// but has no write_files and no stages, and leaves unknown keys open: on its own it would
// pass any write_files or DNS stage. sdkWriteFilesSchema and sdkStagesSchema add them,
// mirrored from what yip (github.com/mudler/yip v1.18.0, the engine under the
// kairos-agent) decodes a "#cloud-config" into, and run through the same kairos-sdk
// validator together with RootSchema:
//   - write_files: pkg/schema/cloudinit.File (encoding, content, owner, path, permissions,
//     all strings; permissions parsed as octal, its valid tag ^0?[0-7]{3,4}$). yip
//     ignores unknown keys; this schema refuses them, so a misspelt key is caught.
//   - stages.<stage>[].dns: pkg/schema.DNS (nameservers, search, options, path).
type sdkExtendedSchema struct {
	schema.RootSchema
	WriteFiles []sdkWriteFilesSchema        `json:"write_files,omitempty"`
	Stages     map[string][]sdkStagesSchema `json:"stages,omitempty"`
}

type sdkWriteFilesSchema struct {
	_           struct{} `additionalProperties:"false"`
	Encoding    string   `json:"encoding,omitempty" pattern:"^(base64|b64|gz|gzip|gz\\+base64|gzip\\+base64|gz\\+b64|gzip\\+b64)$"`
	Content     string   `json:"content,omitempty"`
	Owner       string   `json:"owner,omitempty"`
	Path        string   `json:"path,omitempty" required:"true"`
	Permissions string   `json:"permissions,omitempty" pattern:"^0?[0-7]{3,4}$"`
}

// sdkStagesSchema declares only the stage keys we write; the others stay open.
type sdkStagesSchema struct {
	Name string       `json:"name,omitempty"`
	DNS  sdkDNSSchema `json:"dns,omitempty"`
}

type sdkDNSSchema struct {
	_           struct{} `additionalProperties:"false"`
	Nameservers []string `json:"nameservers,omitempty"`
	Search      []string `json:"search,omitempty"`
	Options     []string `json:"options,omitempty"`
	Path        string   `json:"path,omitempty"`
}

// sdkValidate runs kairos-sdk's validator over doc with the given schema type, the way
// schema.Validate does (header check, then IsValid).
func sdkValidate(doc string, rootType any) error {
	config, err := schema.NewConfigFromYAML(doc, rootType)
	if err != nil {
		return err
	}
	if !config.HasHeader() {
		return errMissingHeader
	}
	if config.IsValid() {
		return nil
	}
	return config.ValidationError
}

var errMissingHeader = errors.New("missing #cloud-config header")

// sdkBootstrapSpec renders a case and parses the KairosConfigTemplate back from YAML:
// as a generic document (for the provider's webhook rules) and strictly as our type.
func sdkBootstrapSpec(t *testing.T, in *Input) (map[string]any, kairos.KairosConfigSpec) {
	t.Helper()
	out, err := Render(in)
	if err != nil {
		t.Fatal(err)
	}
	b, err := yaml.Marshal(out.Bootstrap)
	if err != nil {
		t.Fatal(err)
	}
	var generic map[string]any
	if err := yaml.Unmarshal(b, &generic); err != nil {
		t.Fatal(err)
	}
	if generic["kind"] != "KairosConfigTemplate" {
		t.Fatalf("bootstrap object is a %v, not a KairosConfigTemplate", generic["kind"])
	}
	var typed kairos.KairosConfigTemplate
	if err := yaml.UnmarshalStrict(b, &typed); err != nil {
		t.Fatal(err)
	}
	spec, ok := sdkPath(generic, "spec", "template", "spec").(map[string]any)
	if !ok {
		t.Fatal("no spec.template.spec in the rendered template")
	}
	return spec, typed.Spec.Template.Spec
}

func sdkPath(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// sdkStrings calls f on every key and string value under v.
func sdkStrings(v any, f func(string)) {
	switch v := v.(type) {
	case string:
		f(v)
	case map[string]any:
		for k, e := range v {
			f(k)
			sdkStrings(e, f)
		}
	case []any:
		for _, e := range v {
			sdkStrings(e, f)
		}
	}
}

// sdkMutate returns doc with one change applied to its parsed form.
func sdkMutate(t *testing.T, doc string, change func(m map[string]any)) string {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
		t.Fatal(err)
	}
	change(m)
	b, err := yaml.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return "#cloud-config\n" + string(b)
}

// The provider's limits on a KairosConfig (its webhook): at most kairosSDKMaxFiles files
// of at most kairosMaxFileLength bytes each, absolute paths without "..".
const kairosSDKMaxFiles = 32

// TestKairosCloudConfigValidatesWithKairosSDK builds, for every Kairos golden case that
// renders, the cloud-config the provider writes from our parts and validates it with
// kairos-sdk's schema package; it also checks the rendered template against the
// provider's webhook rules. Broken documents must be refused by the same validator, so
// the check can fail.
func TestKairosCloudConfigValidatesWithKairosSDK(t *testing.T) {
	var names []string
	cases := goldenCases(t)
	for name := range cases {
		if strings.HasPrefix(name, "kairos-") && !strings.HasSuffix(name, "-refused") && !strings.Contains(name, "hostile") {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	if len(names) == 0 {
		t.Fatal("no Kairos golden case renders")
	}
	var sawSSH, sawPassword, sawDNS bool
	var validDoc string
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			generic, spec := sdkBootstrapSpec(t, cases[name])

			// The provider's webhook rules, on the template as rendered.
			for _, key := range []string{"preCommands", "postCommands"} {
				if _, ok := generic[key]; ok {
					t.Errorf("spec.%s is set: the worker must run no command of ours", key)
				}
			}
			kubeadm, ok := generic["kubeadm"]
			if !ok {
				t.Error("spec.kubeadm is missing")
			}
			sdkStrings(kubeadm, func(s string) {
				if strings.Contains(s, "{{") {
					t.Errorf("spec.kubeadm holds %q, which the provider refuses", s)
				}
			})
			files, _ := generic["files"].([]any)
			if len(files) == 0 {
				t.Error("spec.files is empty: the kubelet patch is missing")
			}
			if len(files) > kairosSDKMaxFiles {
				t.Errorf("%d files, over the provider's limit of %d", len(files), kairosSDKMaxFiles)
			}
			for i, f := range files {
				path, _ := sdkPath(f, "path").(string)
				content, _ := sdkPath(f, "content").(string)
				if !strings.HasPrefix(path, "/") || strings.Contains(path, "..") {
					t.Errorf("files[%d].path %q is not absolute or holds \"..\"", i, path)
				}
				if len(content) > kairosMaxFileLength {
					t.Errorf("files[%d] (%s) is %d bytes, over %d", i, path, len(content), kairosMaxFileLength)
				}
			}
			for _, ns := range spec.DNSServers {
				if _, err := netip.ParseAddr(ns); err != nil {
					t.Errorf("dnsServers entry %q is not an IP address: %v", ns, err)
				}
			}

			// The cloud-config, through kairos-sdk.
			doc := sdkDocument(t, spec)
			if strings.Contains(doc, "{{") {
				// yip renders file contents as Go templates on the node.
				t.Errorf("the cloud-config holds %q, which the node would template:\n%s", "{{", doc)
			}
			if err := sdkValidate(doc, schema.RootSchema{}); err != nil {
				t.Errorf("kairos-sdk RootSchema refuses the cloud-config: %v\n%s", err, doc)
			}
			if err := sdkValidate(doc, sdkExtendedSchema{}); err != nil {
				t.Errorf("kairos-sdk with the write_files and stages schema refuses the cloud-config: %v\n%s", err, doc)
			}
			sawSSH = sawSSH || spec.SSHPublicKey != ""
			sawPassword = sawPassword || spec.UserPasswordSecretRef != nil
			sawDNS = sawDNS || len(spec.DNSServers) > 0
			if name == "kairos-default" {
				validDoc = doc
			}
		})
	}
	if !sawSSH || !sawPassword || !sawDNS {
		t.Errorf("the cases do not cover an SSH key (%v), a password (%v) and DNS servers (%v)", sawSSH, sawPassword, sawDNS)
	}
	if validDoc == "" {
		t.Fatal("kairos-default built no cloud-config")
	}

	// The validator refuses what the node could not use. Each broken document is the
	// valid kairos-default one with a single change.
	broken := []struct {
		name   string
		doc    string
		byRoot bool // kairos-sdk's RootSchema alone refuses it
	}{
		{name: "no header", doc: strings.TrimPrefix(validDoc, "#cloud-config\n"), byRoot: true},
		{name: "users as a string", byRoot: true, doc: sdkMutate(t, validDoc, func(m map[string]any) { m["users"] = "kairos" })},
		{name: "no users", byRoot: true, doc: sdkMutate(t, validDoc, func(m map[string]any) { delete(m, "users") })},
		{name: "user without a name", byRoot: true, doc: sdkMutate(t, validDoc, func(m map[string]any) {
			delete(m["users"].([]any)[0].(map[string]any), "name")
		})},
		{name: "ssh_authorized_keys as a string", byRoot: true, doc: sdkMutate(t, validDoc, func(m map[string]any) {
			m["users"].([]any)[0].(map[string]any)["ssh_authorized_keys"] = "ssh-ed25519 AAAA"
		})},
		{name: "write_files permissions as a list", doc: sdkMutate(t, validDoc, func(m map[string]any) {
			m["write_files"].([]any)[0].(map[string]any)["permissions"] = []any{"0644"}
		})},
		{name: "write_files permissions not octal", doc: sdkMutate(t, validDoc, func(m map[string]any) {
			m["write_files"].([]any)[0].(map[string]any)["permissions"] = "0648"
		})},
		{name: "write_files misspelt key", doc: sdkMutate(t, validDoc, func(m map[string]any) {
			f := m["write_files"].([]any)[0].(map[string]any)
			f["permission"] = f["permissions"]
			delete(f, "permissions")
		})},
		{name: "write_files as a map", doc: sdkMutate(t, validDoc, func(m map[string]any) {
			m["write_files"] = map[string]any{"path": "/etc/hosts"}
		})},
		{name: "dns nameservers as a string", doc: sdkMutate(t, validDoc, func(m map[string]any) {
			sdkPath(m, "stages", "boot").([]any)[0].(map[string]any)["dns"].(map[string]any)["nameservers"] = "10.96.0.10"
		})},
	}
	for _, c := range broken {
		t.Run("refused/"+c.name, func(t *testing.T) {
			if err := sdkValidate(c.doc, sdkExtendedSchema{}); err == nil {
				t.Errorf("kairos-sdk with the write_files and stages schema accepts a broken cloud-config:\n%s", c.doc)
			}
			err := sdkValidate(c.doc, schema.RootSchema{})
			switch {
			case c.byRoot && err == nil:
				t.Errorf("kairos-sdk RootSchema accepts a broken cloud-config:\n%s", c.doc)
			case !c.byRoot && err != nil:
				// A tripwire: kairos-sdk now covers this; the mirrored schema may go.
				t.Errorf("kairos-sdk RootSchema now refuses %s (%v): review sdkExtendedSchema", c.name, err)
			}
		})
	}
}
