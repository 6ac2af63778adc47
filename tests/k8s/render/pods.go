package main

// The pods a cluster would run for the rendered manifests, worked out as the controllers
// and the kubelet would: one pod per Job index / StatefulSet ordinal / Deployment replica,
// its hostname and DNS names (headless Service + subdomain/serviceName), and for every
// container the environment (fieldRef, resourceFieldRef, $(VAR) expansion) and argv.
//
// WritePlan lays the plan out as files a shell script reads without a YAML or JSON parser:
//   DIR/hosts                              every DNS name -> pod IP (an /etc/hosts file)
//   DIR/pods                               one line per pod: NAME KIND WORKLOAD IP HOSTNAME
//   DIR/pod/NAME/containers                init containers then containers: "init NAME" / "main NAME"
//   DIR/pod/NAME/c/CONTAINER/argv          NUL-separated command + args (after $(VAR) expansion)
//   DIR/pod/NAME/c/CONTAINER/env           NUL-separated KEY=VALUE
//   DIR/pod/NAME/c/CONTAINER/mounts        lines: MOUNTPATH VOLUMEKIND SOURCE ro|rw
//   DIR/pod/NAME/c/CONTAINER/security      lines: uid N / gid N / fsgroup N / rorootfs B / nonewprivs B / dropall B
//   DIR/pod/NAME/c/CONTAINER/probes        lines: readiness|liveness grpc PORT SERVICE | tcp PORT | http PORT PATH
//   DIR/pod/NAME/c/CONTAINER/ports         lines: NAME PORT
//   DIR/pod/NAME/job                       Job pods: "backoffLimitPerIndex N|-", "maxFailedIndexes N|-",
//                                          "backoffLimit N" (Kubernetes' default 6 when unset)
//   DIR/pod/NAME/on-failure                Job pods, lines "CONTAINER EXIT ACTION ACTION_IF_DISRUPTED" for
//                                          every container and exit code 1..255: what the Job's
//                                          podFailurePolicy does with a pod that failed so
//                                          (Count, Ignore, FailJob, FailIndex), without and with
//                                          the DisruptionTarget condition
//   DIR/secret/NAME/KEY                    the rendered Secrets' data (secrets.go)

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
)

type podPlan struct {
	Name, Kind, Workload, IP, Hostname string
	Namespace                          string
	Index                              int
	Labels, Annotations                map[string]string
	Spec                               map[string]interface{}
	JobSpec                            map[string]interface{} // the owning Job's spec (Job pods)
	DNSNames                           []string
}

type object = map[string]interface{}

func m(o interface{}, keys ...string) object {
	cur, _ := o.(object)
	for _, k := range keys {
		cur, _ = cur[k].(object)
	}
	return cur
}

func str(o object, key string) string {
	switch v := o[key].(type) {
	case string:
		return v
	case nil:
		return ""
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	default:
		return fmt.Sprint(v)
	}
}

func list(o object, key string) []interface{} { l, _ := o[key].([]interface{}); return l }

func num(o object, key string, def int) int {
	if f, ok := o[key].(float64); ok {
		return int(f)
	}
	return def
}

func stringMap(o object) map[string]string {
	out := map[string]string{}
	for k, v := range o {
		out[k] = fmt.Sprint(v)
	}
	return out
}

// PlanPods lists the pods; IPs are handed out from ipBase (e.g. "10.244.0.") from 10 up.
func PlanPods(docs []Rendered, namespace, clusterDomain, ipBase string) ([]*podPlan, []string, error) {
	var pods []*podPlan
	services := map[string]object{}
	for _, d := range docs {
		if d.Object["kind"] == "Service" {
			services[name(d.Object)] = d.Object
		}
	}
	next := 10
	add := func(kind, workload, podName, hostname string, idx int, tmpl object, extraAnn map[string]string) *podPlan {
		p := &podPlan{Name: podName, Kind: kind, Workload: workload, Hostname: hostname, Index: idx,
			Namespace: namespace, IP: fmt.Sprintf("%s%d", ipBase, next),
			Labels: stringMap(m(tmpl, "metadata", "labels")), Annotations: stringMap(m(tmpl, "metadata", "annotations")),
			Spec: m(tmpl, "spec")}
		for k, v := range extraAnn {
			p.Annotations[k] = v
		}
		next++
		pods = append(pods, p)
		return p
	}
	for _, d := range docs {
		o := d.Object
		spec := m(o, "spec")
		tmpl := m(spec, "template")
		switch o["kind"] {
		case "Job":
			n := num(spec, "completions", 1)
			if str(spec, "completionMode") != "Indexed" {
				return nil, nil, fmt.Errorf("Job %s: only Indexed Jobs are emulated", name(o))
			}
			for i := 0; i < n; i++ {
				idx := strconv.Itoa(i)
				// The Job controller: hostname <job>-<index>, the index as annotation, label and env.
				p := add("Job", name(o), fmt.Sprintf("%s-%d", name(o), i), fmt.Sprintf("%s-%d", name(o), i), i, tmpl,
					map[string]string{"batch.kubernetes.io/job-completion-index": idx})
				p.Labels["batch.kubernetes.io/job-completion-index"] = idx
				p.Labels["job-name"] = name(o)
				p.JobSpec = spec
			}
		case "StatefulSet":
			for i := 0; i < num(spec, "replicas", 1); i++ {
				p := add("StatefulSet", name(o), fmt.Sprintf("%s-%d", name(o), i), fmt.Sprintf("%s-%d", name(o), i), i, tmpl, nil)
				p.Spec = copyObj(p.Spec)
				p.Spec["subdomain"] = str(spec, "serviceName")
				p.Labels["apps.kubernetes.io/pod-index"] = strconv.Itoa(i)
			}
		case "Deployment":
			for i := 0; i < num(spec, "replicas", 1); i++ {
				n := fmt.Sprintf("%s-%d", name(o), i)
				add("Deployment", name(o), n, n, i, tmpl, nil)
			}
		}
	}
	// DNS: <hostname>.<subdomain>.<ns>.svc.<domain> when a headless Service of that name
	// selects the pod; <service>.<ns>.svc.<domain> -> the pods it selects.
	var hosts []string
	for _, p := range pods {
		p.DNSNames = []string{p.Hostname}
		if sub := str(p.Spec, "subdomain"); sub != "" {
			svc, ok := services[sub]
			if !ok || str(m(svc, "spec"), "clusterIP") != "None" || !selects(m(svc, "spec", "selector"), p.Labels) {
				return nil, nil, fmt.Errorf("pod %s: subdomain %q is not a headless Service selecting it", p.Name, sub)
			}
			fqdn := fmt.Sprintf("%s.%s.%s.svc.%s", p.Hostname, sub, namespace, clusterDomain)
			p.DNSNames = append([]string{fqdn, fmt.Sprintf("%s.%s", p.Hostname, sub)}, p.DNSNames...)
		}
		hosts = append(hosts, p.IP+" "+strings.Join(p.DNSNames, " "))
	}
	svcNames := make([]string, 0, len(services))
	for n := range services {
		svcNames = append(svcNames, n)
	}
	sort.Strings(svcNames)
	for _, n := range svcNames {
		sel := m(services[n], "spec", "selector")
		for _, p := range pods {
			if len(sel) > 0 && selects(sel, p.Labels) {
				hosts = append(hosts, fmt.Sprintf("%s %s.%s.svc.%s %s.%s %s", p.IP, n, namespace, clusterDomain, n, namespace, n))
			}
		}
	}
	return pods, hosts, nil
}

func copyObj(o object) object {
	out := object{}
	for k, v := range o {
		out[k] = v
	}
	return out
}

func selects(selector object, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != fmt.Sprint(v) {
			return false
		}
	}
	return true
}

var varRef = regexp.MustCompile(`\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)`)

// expand is Kubernetes' $(VAR) expansion: known names are replaced, unknown ones kept,
// $$ is a literal $.
func expand(s string, env map[string]string) string {
	return varRef.ReplaceAllStringFunc(s, func(ref string) string {
		if ref == "$$" {
			return "$"
		}
		if v, ok := env[ref[2:len(ref)-1]]; ok {
			return v
		}
		return ref
	})
}

var annotationRef = regexp.MustCompile(`^metadata\.(annotations|labels)\['(.+)'\]$`)

func (p *podPlan) fieldRef(path string) (string, error) {
	switch path {
	case "metadata.name":
		return p.Name, nil
	case "metadata.namespace":
		return p.Namespace, nil
	case "status.podIP":
		return p.IP, nil
	case "status.hostIP":
		return p.IP, nil
	case "spec.nodeName":
		return "node", nil
	case "spec.serviceAccountName":
		return str(p.Spec, "serviceAccountName"), nil
	}
	if g := annotationRef.FindStringSubmatch(path); g != nil {
		src := p.Annotations
		if g[1] == "labels" {
			src = p.Labels
		}
		if v, ok := src[g[2]]; ok {
			return v, nil
		}
		return "", nil
	}
	return "", fmt.Errorf("fieldRef %s is not emulated", path)
}

// resourceRef: limits.cpu rounds up to whole cores (divisor 1); with no limit, the node's
// allocatable CPUs (here: this machine's).
func resourceRef(c object, resource string) (string, error) {
	res := m(c, "resources")
	switch resource {
	case "limits.cpu", "requests.cpu":
		part := strings.SplitN(resource, ".", 2)[0]
		q := str(m(res, part), "cpu")
		if q == "" {
			return strconv.Itoa(runtime.NumCPU()), nil
		}
		cores := 0.0
		if strings.HasSuffix(q, "m") {
			milli, err := strconv.ParseFloat(strings.TrimSuffix(q, "m"), 64)
			if err != nil {
				return "", err
			}
			cores = milli / 1000
		} else {
			f, err := strconv.ParseFloat(q, 64)
			if err != nil {
				return "", err
			}
			cores = f
		}
		return strconv.Itoa(int(math.Ceil(cores))), nil
	}
	return "", fmt.Errorf("resourceFieldRef %s is not emulated", resource)
}

func (p *podPlan) containerEnv(c object) ([]string, map[string]string, error) {
	env := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := env[k]; !ok {
			order = append(order, k)
		}
		env[k] = v
	}
	// Set by the kubelet and the Job controller.
	set("HOSTNAME", p.Hostname)
	if p.Kind == "Job" {
		set("JOB_COMPLETION_INDEX", strconv.Itoa(p.Index))
	}
	for _, e := range list(c, "env") {
		eo := e.(object)
		k := str(eo, "name")
		if vf := m(eo, "valueFrom"); vf != nil {
			var v string
			var err error
			switch {
			case m(vf, "fieldRef") != nil:
				v, err = p.fieldRef(str(m(vf, "fieldRef"), "fieldPath"))
			case m(vf, "resourceFieldRef") != nil:
				v, err = resourceRef(c, str(m(vf, "resourceFieldRef"), "resource"))
			default:
				err = fmt.Errorf("env %s: only fieldRef and resourceFieldRef are emulated", k)
			}
			if err != nil {
				return nil, nil, fmt.Errorf("pod %s: %v", p.Name, err)
			}
			set(k, v)
			continue
		}
		set(k, expand(str(eo, "value"), env))
	}
	var kv []string
	for _, k := range order {
		kv = append(kv, k+"="+env[k])
	}
	return kv, env, nil
}

func writeNul(path string, items []string) error {
	var b strings.Builder
	for _, s := range items {
		b.WriteString(s)
		b.WriteByte(0)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

func probeLine(kind string, pr object, ports map[string]string) string {
	port := func(o object) string {
		p := str(o, "port")
		if n, ok := ports[p]; ok {
			return n
		}
		return p
	}
	switch {
	case m(pr, "grpc") != nil:
		svc := str(m(pr, "grpc"), "service")
		if svc == "" {
			svc = "-"
		}
		return fmt.Sprintf("%s grpc %s %s\n", kind, port(m(pr, "grpc")), svc)
	case m(pr, "tcpSocket") != nil:
		return fmt.Sprintf("%s tcp %s\n", kind, port(m(pr, "tcpSocket")))
	case m(pr, "httpGet") != nil:
		return fmt.Sprintf("%s http %s %s\n", kind, port(m(pr, "httpGet")), str(m(pr, "httpGet"), "path"))
	case m(pr, "exec") != nil:
		// The command is in probe-KIND.argv beside this file (WritePlan).
		return fmt.Sprintf("%s exec %s\n", kind, kind)
	}
	return ""
}

// PodFailureAction is the Job controller's decision for a pod whose container `container`
// failed with `exit` (pkg/controller/job/pod_failure_policy.go): the first rule of the
// Job's podFailurePolicy that matches, else Count. `disrupted`: the pod has the condition
// DisruptionTarget=True (preempted, evicted, its node lost).
func PodFailureAction(jobSpec object, container string, exit int, disrupted bool) string {
	for _, ri := range list(m(jobSpec, "podFailurePolicy"), "rules") {
		rule, _ := ri.(object)
		if codes := m(rule, "onExitCodes"); codes != nil {
			if c := str(codes, "containerName"); c != "" && c != container {
				continue
			}
			in := false
			for _, v := range list(codes, "values") {
				if f, ok := v.(float64); ok && int(f) == exit {
					in = true
				}
			}
			if in == (str(codes, "operator") == "In") {
				return str(rule, "action")
			}
			continue
		}
		for _, pi := range list(rule, "onPodConditions") {
			pat, _ := pi.(object)
			status := str(pat, "status")
			if status == "" {
				status = "True"
			}
			if disrupted && str(pat, "type") == "DisruptionTarget" && status == "True" {
				return str(rule, "action")
			}
		}
	}
	return "Count"
}

func orDefault(o object, key, def string) string {
	if v := str(o, key); v != "" {
		return v
	}
	return def
}

// writeJobPlan: the Job's limits and its podFailurePolicy as a table, for the emulated
// Job controller in netns_test.sh.
func writeJobPlan(dir string, p *podPlan) error {
	limits := fmt.Sprintf("backoffLimitPerIndex %s\nmaxFailedIndexes %s\nbackoffLimit %s\n",
		orDefault(p.JobSpec, "backoffLimitPerIndex", "-"), orDefault(p.JobSpec, "maxFailedIndexes", "-"),
		orDefault(p.JobSpec, "backoffLimit", "6"))
	var table strings.Builder
	for _, group := range []string{"initContainers", "containers"} {
		for _, ci := range list(p.Spec, group) {
			c := str(ci.(object), "name")
			for exit := 1; exit <= 255; exit++ {
				fmt.Fprintf(&table, "%s %d %s %s\n", c, exit, PodFailureAction(p.JobSpec, c, exit, false),
					PodFailureAction(p.JobSpec, c, exit, true))
			}
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "job"), []byte(limits), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "on-failure"), []byte(table.String()), 0o644)
}

func WritePlan(dir string, pods []*podPlan, hosts []string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "hosts"), []byte("127.0.0.1 localhost\n"+strings.Join(hosts, "\n")+"\n"), 0o644); err != nil {
		return err
	}
	var index strings.Builder
	for _, p := range pods {
		fmt.Fprintf(&index, "%s %s %s %s %s\n", p.Name, p.Kind, p.Workload, p.IP, p.Hostname)
		volumes := map[string]object{}
		for _, v := range list(p.Spec, "volumes") {
			volumes[str(v.(object), "name")] = v.(object)
		}
		podSec := m(p.Spec, "securityContext")
		var containers strings.Builder
		for _, group := range []struct{ key, kind string }{{"initContainers", "init"}, {"containers", "main"}} {
			for _, ci := range list(p.Spec, group.key) {
				c := ci.(object)
				cname := str(c, "name")
				fmt.Fprintf(&containers, "%s %s\n", group.kind, cname)
				cdir := filepath.Join(dir, "pod", p.Name, "c", cname)
				if err := os.MkdirAll(cdir, 0o755); err != nil {
					return err
				}
				kv, env, err := p.containerEnv(c)
				if err != nil {
					return err
				}
				var argv []string
				for _, a := range append(list(c, "command"), list(c, "args")...) {
					argv = append(argv, expand(fmt.Sprint(a), env))
				}
				if len(list(c, "command")) == 0 {
					return fmt.Errorf("pod %s container %s: no command (the image's entrypoint is not emulated)", p.Name, cname)
				}
				var mounts strings.Builder
				for _, vmi := range list(c, "volumeMounts") {
					vm := vmi.(object)
					v, ok := volumes[str(vm, "name")]
					if !ok {
						return fmt.Errorf("pod %s container %s: mount of unknown volume %q", p.Name, cname, str(vm, "name"))
					}
					mode := "rw"
					if vm["readOnly"] == true {
						mode = "ro"
					}
					switch {
					case m(v, "persistentVolumeClaim") != nil:
						pvc := m(v, "persistentVolumeClaim")
						if pvc["readOnly"] == true {
							mode = "ro"
						}
						fmt.Fprintf(&mounts, "%s pvc %s %s\n", str(vm, "mountPath"), str(pvc, "claimName"), mode)
					case v["emptyDir"] != nil:
						fmt.Fprintf(&mounts, "%s emptyDir %s %s\n", str(vm, "mountPath"), str(v, "name"), mode)
					case m(v, "secret") != nil:
						// PATH secret VOLUME ro SECRET MODE KEY=FILE,... ("-": every key as itself);
						// pod_run.sh makes the pod's view of the Secret as the kubelet does.
						s := m(v, "secret")
						var items []string
						for _, ii := range list(s, "items") {
							items = append(items, str(ii.(object), "key")+"="+str(ii.(object), "path"))
						}
						fmt.Fprintf(&mounts, "%s secret %s %s %s %s %s\n", str(vm, "mountPath"), str(v, "name"), mode,
							str(s, "secretName"), orDefault(s, "defaultMode", "420"), orDash(strings.Join(items, ",")))
					default:
						return fmt.Errorf("pod %s: volume %s: only persistentVolumeClaim, emptyDir and secret are emulated", p.Name, str(v, "name"))
					}
				}
				sec := m(c, "securityContext")
				pick := func(k string) string {
					if v := str(sec, k); v != "" {
						return v
					}
					return str(podSec, k)
				}
				security := fmt.Sprintf("uid %s\ngid %s\nfsgroup %s\nrorootfs %s\nnonewprivs %s\ndropall %v\n",
					orDash(pick("runAsUser")), orDash(pick("runAsGroup")), orDash(str(podSec, "fsGroup")),
					orDash(str(sec, "readOnlyRootFilesystem")), orDash(str(sec, "allowPrivilegeEscalation")),
					strings.Contains(fmt.Sprint(m(sec, "capabilities")["drop"]), "ALL"))
				ports := map[string]string{}
				var portLines strings.Builder
				for _, pi := range list(c, "ports") {
					po := pi.(object)
					ports[str(po, "name")] = str(po, "containerPort")
					fmt.Fprintf(&portLines, "%s %s\n", orDash(str(po, "name")), str(po, "containerPort"))
				}
				probes := probeLine("readiness", m(c, "readinessProbe"), ports) + probeLine("liveness", m(c, "livenessProbe"), ports)
				for _, kind := range []string{"readiness", "liveness"} {
					if ex := m(m(c, kind+"Probe"), "exec"); ex != nil {
						var probeArgv []string
						for _, a := range list(ex, "command") {
							probeArgv = append(probeArgv, fmt.Sprint(a))
						}
						if err := writeNul(filepath.Join(cdir, "probe-"+kind+".argv"), probeArgv); err != nil {
							return err
						}
					}
				}
				for file, content := range map[string]string{"mounts": mounts.String(), "security": security,
					"probes": probes, "ports": portLines.String()} {
					if err := os.WriteFile(filepath.Join(cdir, file), []byte(content), 0o644); err != nil {
						return err
					}
				}
				if err := writeNul(filepath.Join(cdir, "argv"), argv); err != nil {
					return err
				}
				if err := writeNul(filepath.Join(cdir, "env"), kv); err != nil {
					return err
				}
			}
		}
		if err := os.WriteFile(filepath.Join(dir, "pod", p.Name, "containers"), []byte(containers.String()), 0o644); err != nil {
			return err
		}
		if p.Kind == "Job" {
			if err := writeJobPlan(filepath.Join(dir, "pod", p.Name), p); err != nil {
				return err
			}
		}
	}
	return os.WriteFile(filepath.Join(dir, "pods"), []byte(index.String()), 0o644)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
