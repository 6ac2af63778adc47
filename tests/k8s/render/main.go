// k8s-render: `helm template` for the tests, with no helm binary. Renders a chart with
// Go text/template + sprig (the engine Helm uses), applies values.schema.json, and can lay
// out the pods a cluster would run (for tests/k8s/netns_test.sh).
//
//	k8s-render [-f values.yaml]... [--set k=v]... [--set-string k=v]... [-n NAMESPACE] [--kube-version V]
//	           [-o yaml|json] [--notes FILE] [--plan DIR --ip-base 10.244.0.]
//	           [--upgrade] [--lookup OBJECTS.yaml] [-a API_VERSION]... RELEASE CHART
//
// --upgrade renders as `helm upgrade` does (.Release.IsUpgrade); --lookup gives `lookup`
// the cluster's objects (a multi-document YAML file, e.g. an earlier rendering), found by
// apiVersion, kind, namespace and name; -a adds an API version to .Capabilities.APIVersions
// (helm template's --api-versions).
//
// Exit status: 0 rendered; 1 the chart or its values were refused (the message says why,
// in Helm's words where Helm has them); 2 usage.
//
// Built in GOPATH mode from Debian's packages (golang-github-masterminds-sprig-dev,
// golang-k8s-sigs-yaml-dev, golang-github-xeipuuv-gojsonschema-dev); see build.sh.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"

	"sigs.k8s.io/yaml"
)

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

func main() {
	var valueFiles, sets, setStrings multi
	fs := flag.NewFlagSet("k8s-render", flag.ContinueOnError)
	fs.Var(&valueFiles, "f", "values file (repeatable)")
	fs.Var(&valueFiles, "values", "values file (repeatable)")
	fs.Var(&sets, "set", "key=value[,key=value] (repeatable)")
	fs.Var(&setStrings, "set-string", "key=value, always a string (repeatable)")
	namespace := fs.String("n", "default", "release namespace")
	kubeVersion := fs.String("kube-version", "v1.29.0", "the cluster's Kubernetes version (.Capabilities.KubeVersion), checked against Chart.yaml kubeVersion")
	output := fs.String("o", "yaml", "yaml (as helm template prints) or json (a list of documents)")
	notes := fs.String("notes", "", "write the rendered NOTES.txt here")
	plan := fs.String("plan", "", "write the pod plan (see pods.go) into this directory")
	ipBase := fs.String("ip-base", "10.244.0.", "pod addresses for --plan: this prefix + 10, 11, ...")
	upgrade := fs.Bool("upgrade", false, "render as helm upgrade (.Release.IsUpgrade)")
	lookupFile := fs.String("lookup", "", "objects that lookup finds (multi-document YAML)")
	var apiVersions multi
	fs.Var(&apiVersions, "a", "API version the cluster serves, added to .Capabilities.APIVersions (repeatable)")
	fs.Var(&apiVersions, "api-versions", "same as -a")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if fs.NArg() != 2 {
		fmt.Fprintln(os.Stderr, "usage: k8s-render [flags] RELEASE CHART")
		os.Exit(2)
	}
	rel := Release{Name: fs.Arg(0), Namespace: *namespace, KubeVersion: *kubeVersion, Upgrade: *upgrade, APIVersions: apiVersions}
	if *lookupFile != "" {
		objs, err := loadObjects(*lookupFile)
		if err != nil {
			fmt.Fprintf(os.Stderr, "Error: --lookup: %v\n", err)
			os.Exit(2)
		}
		rel.Cluster = objs
	}
	if err := run(rel, fs.Arg(1), valueFiles, sets, setStrings, *output, *notes, *plan, *ipBase); err != nil {
		fmt.Fprintf(os.Stderr, "Error: %v\n", err)
		os.Exit(1)
	}
}

func run(rel Release, chartDir string, valueFiles, sets, setStrings []string, output, notesPath, planDir, ipBase string) error {
	namespace := rel.Namespace
	chart, err := LoadChart(chartDir)
	if err != nil {
		return err
	}
	user := Values{}
	for _, f := range valueFiles {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		v := Values{}
		if err := yaml.Unmarshal(data, &v); err != nil {
			return fmt.Errorf("%s: %v", f, err)
		}
		user = Coalesce(user, v)
	}
	for _, s := range sets {
		if err := ParseSet(user, s, false); err != nil {
			return err
		}
	}
	for _, s := range setStrings {
		if err := ParseSet(user, s, true); err != nil {
			return err
		}
	}
	vals := Coalesce(chart.Defaults, user)
	if err := ValidateValues(chart, vals); err != nil {
		return err
	}
	docs, notes, err := Render(chart, rel, vals)
	if err != nil {
		return err
	}
	if notesPath != "" {
		if err := os.WriteFile(notesPath, []byte(notes), 0o644); err != nil {
			return err
		}
	}
	if planDir != "" {
		domain, _ := vals["clusterDomain"].(string)
		if domain == "" {
			domain = "cluster.local"
		}
		pods, hosts, err := PlanPods(docs, namespace, domain, ipBase)
		if err != nil {
			return err
		}
		if err := WritePlan(planDir, pods, hosts); err != nil {
			return err
		}
		if err := WriteSecrets(planDir, docs); err != nil {
			return err
		}
	}
	switch output {
	case "yaml":
		for _, d := range docs {
			fmt.Printf("---\n# Source: %s\n%s", d.Source, d.Text)
		}
	case "json":
		type doc struct {
			Source string                 `json:"source"`
			Object map[string]interface{} `json:"object"`
		}
		out := []doc{}
		for _, d := range docs {
			out = append(out, doc{d.Source, d.Object})
		}
		b, err := json.MarshalIndent(out, "", " ")
		if err != nil {
			return err
		}
		fmt.Println(string(b))
	default:
		return fmt.Errorf("-o %s: yaml or json", output)
	}
	return nil
}

// loadObjects reads the objects `lookup` finds: every document of a YAML file.
func loadObjects(path string) ([]map[string]interface{}, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []map[string]interface{}
	for _, d := range splitDocs(string(data)) {
		obj := map[string]interface{}{}
		if err := yaml.Unmarshal([]byte(d), &obj); err != nil {
			return nil, fmt.Errorf("%s: %v", path, err)
		}
		if len(obj) > 0 {
			out = append(out, obj)
		}
	}
	return out, nil
}
