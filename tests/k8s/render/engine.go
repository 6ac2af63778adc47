package main

// The template engine: Go text/template with sprig and Helm's own functions (include, tpl,
// required, toYaml, fromYaml, toJson, fromJson, lookup), rendering every template of
// the chart as `helm template` does. A chart that uses anything else fails here loudly.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strings"
	"text/template"

	semver "github.com/Masterminds/semver" // v3, at its GOPATH path
	sprig "github.com/Masterminds/sprig"
	"sigs.k8s.io/yaml"
)

type Release struct {
	Name, Namespace string
	KubeVersion     string                   // the cluster's, e.g. "v1.29.0" (helm template --kube-version)
	Upgrade         bool                     // helm upgrade: .Release.IsUpgrade
	APIVersions     []string                 // served beyond the built-in ones (--api-versions)
	Cluster         []map[string]interface{} // what lookup finds (--lookup); none: as helm template
}

// Rendered is one manifest document.
type Rendered struct {
	Source string                 // e.g. dtrain/templates/worker.yaml
	Text   string                 // the YAML document
	Object map[string]interface{} // parsed
}

type files map[string][]byte

func (f files) Get(name string) string      { return string(f[name]) }
func (f files) GetBytes(name string) []byte { return f[name] }
func (f files) Glob(pattern string) files {
	out := files{}
	for k, v := range f {
		if ok, _ := path.Match(pattern, k); ok {
			out[k] = v
		}
	}
	return out
}

type capabilities struct {
	KubeVersion struct{ Version, Major, Minor, GitVersion string }
	APIVersions apiVersions
}

type apiVersions []string

func (a apiVersions) Has(v string) bool {
	for _, x := range a {
		if x == v {
			return true
		}
	}
	return false
}

func funcMap(t **template.Template, cluster []map[string]interface{}) template.FuncMap {
	f := sprig.TxtFuncMap()
	// Helm removes these: a chart must not depend on the machine rendering it.
	delete(f, "env")
	delete(f, "expandenv")
	include := func(name string, data interface{}) (string, error) {
		var buf bytes.Buffer
		if err := (*t).ExecuteTemplate(&buf, name, data); err != nil {
			return "", err
		}
		return buf.String(), nil
	}
	f["include"] = include
	f["tpl"] = func(text string, data interface{}) (string, error) {
		clone, err := (*t).Clone()
		if err != nil {
			return "", err
		}
		if _, err := clone.New("tpl").Parse(text); err != nil {
			return "", err
		}
		var buf bytes.Buffer
		if err := clone.ExecuteTemplate(&buf, "tpl", data); err != nil {
			return "", err
		}
		return strings.ReplaceAll(buf.String(), "<no value>", ""), nil
	}
	f["required"] = func(msg string, v interface{}) (interface{}, error) {
		if v == nil {
			return nil, fmt.Errorf("%s", msg)
		}
		if s, ok := v.(string); ok && s == "" {
			return nil, fmt.Errorf("%s", msg)
		}
		return v, nil
	}
	f["fail"] = func(msg string) (string, error) { return "", fmt.Errorf("%s", msg) }
	f["toYaml"] = func(v interface{}) string {
		b, err := yaml.Marshal(v)
		if err != nil {
			return ""
		}
		return strings.TrimSuffix(string(b), "\n")
	}
	f["fromYaml"] = func(s string) map[string]interface{} {
		m := map[string]interface{}{}
		if err := yaml.Unmarshal([]byte(s), &m); err != nil {
			m["Error"] = err.Error()
		}
		return m
	}
	f["toJson"] = func(v interface{}) string {
		b, err := json.Marshal(v)
		if err != nil {
			return ""
		}
		return string(b)
	}
	f["fromJson"] = func(s string) map[string]interface{} {
		m := map[string]interface{}{}
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			m["Error"] = err.Error()
		}
		return m
	}
	// No cluster here: lookup finds nothing, as under `helm template`, unless --lookup gave
	// objects. A name finds one object (or an empty map); no name, a List of them.
	f["lookup"] = func(apiVersion, kind, namespace, name string) (map[string]interface{}, error) {
		var items []interface{}
		for _, o := range cluster {
			md, _ := o["metadata"].(map[string]interface{})
			ns, _ := md["namespace"].(string)
			if ns == "" {
				ns = "default"
			}
			if o["apiVersion"] != apiVersion || o["kind"] != kind || (namespace != "" && ns != namespace) {
				continue
			}
			if name == "" {
				items = append(items, o)
			} else if md["name"] == name {
				return o, nil
			}
		}
		if name == "" {
			return map[string]interface{}{"apiVersion": "v1", "kind": kind + "List", "items": items}, nil
		}
		return map[string]interface{}{}, nil
	}
	return f
}

// Render renders every template; notes is NOTES.txt's output ("" if none).
func Render(c *Chart, rel Release, vals Values) (docs []Rendered, notes string, err error) {
	chartName := fmt.Sprint(c.Meta["name"])
	chartObj := map[string]interface{}{}
	for k, v := range c.Meta {
		chartObj[strings.ToUpper(k[:1])+k[1:]] = v // .Chart.Name, .Chart.AppVersion...
	}
	caps := capabilities{APIVersions: append(apiVersions{"v1", "apps/v1", "batch/v1", "policy/v1"}, rel.APIVersions...)}
	kv, err := checkKubeVersion(c, rel.KubeVersion)
	if err != nil {
		return nil, "", err
	}
	caps.KubeVersion.Version = "v" + kv.String()
	caps.KubeVersion.Major, caps.KubeVersion.Minor = fmt.Sprint(kv.Major()), fmt.Sprint(kv.Minor())
	caps.KubeVersion.GitVersion = caps.KubeVersion.Version

	var t *template.Template
	t = template.New("gotpl").Option("missingkey=zero").Funcs(funcMap(&t, rel.Cluster))
	names := make([]string, 0, len(c.Templates))
	for n := range c.Templates {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if _, err := t.New(chartName + "/" + n).Parse(c.Templates[n]); err != nil {
			return nil, "", fmt.Errorf("parse error: %v", err)
		}
	}
	for _, n := range names {
		base := path.Base(n)
		if strings.HasPrefix(base, "_") {
			continue // partials only define templates
		}
		full := chartName + "/" + n
		data := map[string]interface{}{
			"Values":       vals,
			"Release":      map[string]interface{}{"Name": rel.Name, "Namespace": rel.Namespace, "Service": "Helm", "IsInstall": !rel.Upgrade, "IsUpgrade": rel.Upgrade, "Revision": revision(rel)},
			"Chart":        chartObj,
			"Files":        files(c.Files),
			"Capabilities": caps,
			"Template":     map[string]interface{}{"Name": full, "BasePath": chartName + "/templates"},
		}
		var buf bytes.Buffer
		if err := t.ExecuteTemplate(&buf, full, data); err != nil {
			return nil, "", fmt.Errorf("execution error: %v", err)
		}
		out := strings.ReplaceAll(buf.String(), "<no value>", "")
		if base == "NOTES.txt" {
			notes = out
			continue
		}
		for _, d := range splitDocs(out) {
			obj := map[string]interface{}{}
			if err := yaml.UnmarshalStrict([]byte(d), &obj); err != nil {
				return nil, "", fmt.Errorf("%s: YAML parse error: %v\n%s", full, err, numbered(d))
			}
			if len(obj) == 0 {
				continue
			}
			docs = append(docs, Rendered{Source: full, Text: d, Object: obj})
		}
	}
	sortInstallOrder(docs)
	return docs, notes, nil
}

// checkKubeVersion refuses a cluster version outside Chart.yaml's kubeVersion range, in
// Helm's words (pkg/action: "chart requires kubeVersion: ... which is incompatible with
// Kubernetes ...").
func checkKubeVersion(c *Chart, version string) (*semver.Version, error) {
	if version == "" {
		version = "v1.29.0"
	}
	v, err := semver.NewVersion(version)
	if err != nil {
		return nil, fmt.Errorf("--kube-version %q: %v", version, err)
	}
	want, _ := c.Meta["kubeVersion"].(string)
	if want == "" {
		return v, nil
	}
	constraint, err := semver.NewConstraint(want)
	if err != nil {
		return nil, fmt.Errorf("Chart.yaml kubeVersion %q: %v", want, err)
	}
	if !constraint.Check(v) {
		return nil, fmt.Errorf("chart requires kubeVersion: %s which is incompatible with Kubernetes v%s", want, v)
	}
	return v, nil
}

var docSep = regexp.MustCompile(`(?m)^---[ \t]*$`)

func splitDocs(s string) []string {
	var out []string
	for _, d := range docSep.Split(s, -1) {
		if strings.TrimSpace(stripComments(d)) != "" {
			out = append(out, strings.Trim(d, "\n")+"\n")
		}
	}
	return out
}

func stripComments(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

func numbered(s string) string {
	var b strings.Builder
	for i, l := range strings.Split(s, "\n") {
		fmt.Fprintf(&b, "%4d | %s\n", i+1, l)
	}
	return b.String()
}

// Helm's install order (pkg/releaseutil/kind_sorter.go), abridged to the kinds we use.
var installOrder = []string{"Namespace", "NetworkPolicy", "ResourceQuota", "LimitRange",
	"PodSecurityPolicy", "PodDisruptionBudget", "ServiceAccount", "Secret", "SecretList",
	"ConfigMap", "StorageClass", "PersistentVolume", "PersistentVolumeClaim",
	"CustomResourceDefinition", "ClusterRole", "ClusterRoleList", "ClusterRoleBinding",
	"ClusterRoleBindingList", "Role", "RoleList", "RoleBinding", "RoleBindingList", "Service",
	"DaemonSet", "Pod", "ReplicationController", "ReplicaSet", "Deployment",
	"HorizontalPodAutoscaler", "StatefulSet", "Job", "CronJob", "IngressClass", "Ingress",
	"APIService"}

func sortInstallOrder(docs []Rendered) {
	rank := func(d Rendered) int {
		k, _ := d.Object["kind"].(string)
		for i, x := range installOrder {
			if x == k {
				return i
			}
		}
		return len(installOrder) // unknown kinds (CRs) last
	}
	sort.SliceStable(docs, func(i, j int) bool {
		ri, rj := rank(docs[i]), rank(docs[j])
		if ri != rj {
			return ri < rj
		}
		return name(docs[i].Object) < name(docs[j].Object)
	})
}

func name(o map[string]interface{}) string {
	md, _ := o["metadata"].(map[string]interface{})
	n, _ := md["name"].(string)
	return n
}

func revision(rel Release) int {
	if rel.Upgrade {
		return 2
	}
	return 1
}
