package main

// Loading a chart directory and computing its values the way Helm 3 does: the chart's
// values.yaml, then each -f file, then each --set / --set-string, merged key by key (a
// null deletes the key), then checked against values.schema.json.

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/xeipuuv/gojsonschema"
	"sigs.k8s.io/yaml"
)

type Values = map[string]interface{}

// Chart is what the templates see as .Chart, plus the files Helm loads.
type Chart struct {
	Dir       string
	Meta      map[string]interface{} // Chart.yaml
	Defaults  Values                 // values.yaml
	Schema    []byte                 // values.schema.json, or nil
	Templates map[string]string      // "templates/x.yaml" -> text
	Files     map[string][]byte      // every other file, by path relative to Dir
}

// LoadChart reads a chart directory. Like Helm it follows symbolic links (a linked file's
// contents are used) and fails on a dangling one.
func LoadChart(dir string) (*Chart, error) {
	c := &Chart{Dir: dir, Templates: map[string]string{}, Files: map[string][]byte{}}
	err := walkFollowingLinks(dir, "", func(rel string, data []byte) error {
		switch {
		case rel == "Chart.yaml":
			return yaml.Unmarshal(data, &c.Meta)
		case rel == "values.yaml":
			return yaml.Unmarshal(data, &c.Defaults)
		case rel == "values.schema.json":
			c.Schema = data
		case strings.HasPrefix(rel, "templates/"):
			c.Templates[rel] = string(data)
		default:
			c.Files[rel] = data
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if c.Meta == nil {
		return nil, fmt.Errorf("%s: no Chart.yaml", dir)
	}
	if c.Defaults == nil {
		c.Defaults = Values{}
	}
	for _, k := range []string{"apiVersion", "name", "version"} {
		if _, ok := c.Meta[k]; !ok {
			return nil, fmt.Errorf("Chart.yaml: %s is required", k)
		}
	}
	return c, nil
}

func walkFollowingLinks(root, rel string, fn func(string, []byte) error) error {
	entries, err := os.ReadDir(filepath.Join(root, rel))
	if err != nil {
		return err
	}
	for _, e := range entries {
		r := filepath.ToSlash(filepath.Join(rel, e.Name()))
		full := filepath.Join(root, r)
		info, err := os.Stat(full) // follows links
		if err != nil {
			return fmt.Errorf("chart file %s: %v", r, err)
		}
		if info.IsDir() {
			if err := walkFollowingLinks(root, r, fn); err != nil {
				return err
			}
			continue
		}
		data, err := os.ReadFile(full)
		if err != nil {
			return err
		}
		if err := fn(r, data); err != nil {
			return fmt.Errorf("%s: %v", r, err)
		}
	}
	return nil
}

// Coalesce merges `over` onto `base` (both left untouched): maps merge recursively,
// anything else replaces, and a nil in `over` deletes the key.
func Coalesce(base, over Values) Values {
	out := Values{}
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		if v == nil {
			delete(out, k)
			continue
		}
		bm, bok := out[k].(map[string]interface{})
		om, ook := v.(map[string]interface{})
		if bok && ook {
			out[k] = Coalesce(bm, om)
		} else {
			out[k] = v
		}
	}
	return out
}

// ParseSet applies one --set (or --set-string when asString) argument to vals:
// comma-separated key=value pairs, keys as dotted paths with optional [i] indices.
// Values are typed as Helm's strvals types them: true/false, null, integers without a
// leading zero; everything else (floats too) is a string.
func ParseSet(vals Values, arg string, asString bool) error {
	for _, pair := range splitUnescaped(arg, ',') {
		eq := strings.IndexByte(pair, '=')
		if eq < 0 {
			return fmt.Errorf("--set %q: expected key=value", pair)
		}
		key, raw := pair[:eq], strings.ReplaceAll(pair[eq+1:], `\,`, ",")
		var val interface{} = raw
		if !asString {
			val = typedVal(raw)
		}
		var path []string
		for _, part := range splitUnescaped(key, '.') {
			path = append(path, strings.ReplaceAll(part, `\.`, "."))
		}
		if err := setPath(vals, path, val); err != nil {
			return fmt.Errorf("--set %s: %v", key, err)
		}
	}
	return nil
}

func splitUnescaped(s string, sep byte) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' {
			i++
			continue
		}
		if s[i] == sep {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

func typedVal(v string) interface{} {
	switch strings.ToLower(v) {
	case "true":
		return true
	case "false":
		return false
	case "null":
		return nil
	case "0":
		return int64(0)
	}
	if v != "" && v[0] != '0' {
		if i, err := strconv.ParseInt(v, 10, 64); err == nil {
			return i
		}
	}
	return v
}

func setPath(m Values, path []string, val interface{}) error {
	key := path[0]
	idx := -1
	if lb := strings.IndexByte(key, '['); lb >= 0 && strings.HasSuffix(key, "]") {
		n, err := strconv.Atoi(key[lb+1 : len(key)-1])
		if err != nil || n < 0 {
			return fmt.Errorf("bad index in %q", key)
		}
		key, idx = key[:lb], n
	}
	if idx < 0 {
		if len(path) == 1 {
			m[key] = val
			return nil
		}
		child, ok := m[key].(map[string]interface{})
		if !ok {
			child = Values{}
			m[key] = child
		}
		return setPath(child, path[1:], val)
	}
	list, _ := m[key].([]interface{})
	for len(list) <= idx {
		list = append(list, nil)
	}
	if len(path) == 1 {
		list[idx] = val
	} else {
		child, ok := list[idx].(map[string]interface{})
		if !ok {
			child = Values{}
		}
		if err := setPath(child, path[1:], val); err != nil {
			return err
		}
		list[idx] = child
	}
	m[key] = list
	return nil
}

// ValidateValues checks vals against the chart's schema, with Helm's wording.
func ValidateValues(c *Chart, vals Values) error {
	if c.Schema == nil {
		return nil
	}
	doc, err := yaml.Marshal(vals) // through JSON: numbers become JSON numbers
	if err != nil {
		return err
	}
	js, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return err
	}
	res, err := gojsonschema.Validate(gojsonschema.NewBytesLoader(c.Schema), gojsonschema.NewBytesLoader(js))
	if err != nil {
		return fmt.Errorf("values.schema.json: %v", err)
	}
	if res.Valid() {
		return nil
	}
	var lines []string
	for _, e := range res.Errors() {
		lines = append(lines, fmt.Sprintf("- %s: %s", e.Field(), e.Description()))
	}
	sort.Strings(lines)
	return fmt.Errorf("values don't meet the specifications of the schema(s) in the following chart(s):\n%s:\n%s",
		c.Meta["name"], strings.Join(lines, "\n"))
}
