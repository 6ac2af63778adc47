package main

// The Secrets the chart renders (its own CA and certificates, tls-secrets.yaml), laid out
// for --plan as the API server would hold them, so that the namespace test mounts what
// the chart made rather than certificates of its own:
//   DIR/secret/NAME/KEY    each key of data (base64-decoded) and of stringData

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

func WriteSecrets(dir string, docs []Rendered) error {
	for _, d := range docs {
		if d.Object["kind"] != "Secret" {
			continue
		}
		name := str(m(d.Object, "metadata"), "name")
		if name == "" || strings.ContainsAny(name, "/\x00") {
			return fmt.Errorf("%s: a Secret without a usable name %q", d.Source, name)
		}
		sdir := filepath.Join(dir, "secret", name)
		if err := os.MkdirAll(sdir, 0o755); err != nil {
			return err
		}
		write := func(key string, value []byte) error {
			if key == "" || strings.ContainsAny(key, "/\x00") || key == "." || key == ".." {
				return fmt.Errorf("Secret %s: key %q is no file name", name, key)
			}
			return os.WriteFile(filepath.Join(sdir, key), value, 0o600)
		}
		for k, v := range m(d.Object, "data") {
			s, _ := v.(string)
			b, err := base64.StdEncoding.DecodeString(s)
			if err != nil {
				return fmt.Errorf("Secret %s: data.%s is not base64: %v", name, k, err)
			}
			if err := write(k, b); err != nil {
				return err
			}
		}
		for k, v := range m(d.Object, "stringData") {
			if err := write(k, []byte(fmt.Sprint(v))); err != nil {
				return err
			}
		}
	}
	return nil
}
