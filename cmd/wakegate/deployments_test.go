package main

// The offline check of deployments/ ("the compose file and
// manifests are checked in CI offline"): no docker, no cluster, no
// Prometheus. Everything is compared with the binary itself — the settings
// table (settings()), the flag parser (parseConfig), the subcommand
// dispatcher (run), the gateway and worker handlers, and the metrics a real
// stack registers — so a renamed variable, flag, route, port or metric
// breaks it.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/goccy/go-yaml"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/integration/bench"
	"github.com/wakegate/wakegate/integration/stack"
	"github.com/wakegate/wakegate/providers/github/app"
	"github.com/wakegate/wakegate/providers/github/app/apptest"
)

const deployDir = "../../deployments"

// roles are the subcommands a deployment may run; each must also be one
// run() dispatches (checked in checkRole).
var roles = []string{"serve", "gateway", "worker"}

// cliEnv are the variables of the CLI side (docs/design.md §12), not of the
// settings table.
var cliEnv = []string{"WAKEGATE_URL", "WAKEGATE_TOKEN", "WAKEGATE_SESSION"}

// acceptedEnv is every variable the binary reads: the settings table,
// <NAME>_FILE for its secrets, and the CLI's.
func acceptedEnv() map[string]bool {
	ok := map[string]bool{}
	for _, s := range settings() {
		ok[s.env] = true
		if s.secret {
			ok[s.env+"_FILE"] = true
		}
	}
	for _, e := range cliEnv {
		ok[e] = true
	}
	return ok
}

func isSecret(env string) bool {
	for _, s := range settings() {
		if s.env == env {
			return s.secret
		}
	}
	return false
}

// placeholder stands for a secret whose value a manifest cannot show.
func placeholder(env string) string {
	switch env {
	case "WAKEGATE_REDIS_URL":
		return "redis://redis.invalid:6379/0"
	case "WAKEGATE_GITHUB_APP_PRIVATE_KEY", "WAKEGATE_JWT_PUBLIC_KEYS", "WAKEGATE_OPERATOR_PASSWORD":
		return "" // optional: empty turns the feature off
	}
	return "placeholder-" + strings.ToLower(env)
}

// container is one wakegate process a deployment file starts.
type container struct {
	where string            // for messages: file and service / container
	args  []string          // after the image's ENTRYPOINT ["wakegate"]
	env   map[string]string // as the process sees it (secrets: placeholders)
	files map[string]string // <NAME>_FILE → its path in the container
}

// process is what the binary makes of a container's arguments and
// environment.
type process struct {
	role   string
	cfg    *config
	listen int // the port its HTTP server (with /healthz and /readyz) listens on
}

// start parses c as the binary does, and checks what runService would
// refuse at start.
func start(t *testing.T, c container) process {
	t.Helper()
	if len(c.args) == 0 {
		t.Fatalf("%s: no subcommand (the image's default is serve; say which role)", c.where)
	}
	role := c.args[0]
	checkRole(t, c.where, role)
	accepted := acceptedEnv()
	for name := range c.env {
		if strings.HasPrefix(name, "WAKEGATE_") && !accepted[name] {
			t.Errorf("%s: %s is not a variable wakegate reads (settings table, <secret>_FILE, or the CLI's)", c.where, name)
		}
	}
	dir := t.TempDir()
	getenv := func(name string) string {
		if _, ok := c.files[name]; ok {
			base := strings.TrimSuffix(name, "_FILE")
			p := filepath.Join(dir, base)
			if err := os.WriteFile(p, []byte(placeholder(base)), 0o600); err != nil {
				t.Fatal(err)
			}
			return p
		}
		return c.env[name]
	}
	fs := flag.NewFlagSet("wakegate "+role, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg, err := parseConfig(fs, c.args[1:], getenv)
	if err != nil {
		t.Fatalf("%s: wakegate %s would not start: %v", c.where, strings.Join(c.args, " "), err)
	}
	if fs.NArg() > 0 {
		t.Errorf("%s: wakegate ignores the arguments %q (flags are --name value)", c.where, fs.Args())
	}
	if role != "serve" && cfg.RedisURL == "" {
		t.Errorf("%s: %s refuses to start without WAKEGATE_REDIS_URL", c.where, role)
	}
	if cfg.RedisURL != "" {
		rdb, err := stack.NewClient(cfg.RedisURL, cfg.Shards)
		if err != nil {
			t.Errorf("%s: %v", c.where, err)
		} else {
			_ = rdb.Close()
		}
	}
	p := process{role: role, cfg: cfg}
	addr := cfg.Addr
	if role == "worker" {
		addr = cfg.WorkerAddr
	}
	_, port, err := net.SplitHostPort(addr)
	if err == nil {
		p.listen, err = strconv.Atoi(port)
	}
	if err != nil || p.listen == 0 {
		t.Fatalf("%s: %s listens on %q: want a fixed port", c.where, role, addr)
	}
	return p
}

// checkRole: role is one of roles, and run() knows it.
func checkRole(t *testing.T, where, role string) {
	t.Helper()
	if !slices.Contains(roles, role) {
		t.Fatalf("%s: %q is not a wakegate service subcommand (%v)", where, role, roles)
	}
	if code := run([]string{role, "--help"}, io.Discard, io.Discard); code != 0 {
		t.Fatalf("%s: wakegate %s --help exits %d: not a subcommand", where, role, code)
	}
}

// assembled is a process's stack on an in-memory Redis, as runService
// builds it: its HTTP handler (gateway, serve) or its admin server
// (worker), and its metrics registry.
type assembled struct {
	handler http.Handler
	reg     *prometheus.Registry
}

func assemble(t *testing.T, p process) assembled {
	t.Helper()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	cfg := *p.cfg
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	st, err := stack.New(rdb, stack.Config{
		Prefix: cfg.RedisPrefix, Shards: cfg.Shards, Retention: cfg.Retention, JournalMaxLen: cfg.JournalMaxLen,
		RequiredChecks: cfg.RequiredChecks, ReadySettle: cfg.ReadySettle, SessionTTL: cfg.SessionTTL,
		PushRetry: cfg.PushRetry, PushQueues: cfg.PushQueues, AllowPrivateEndpoints: cfg.AllowPrivateEndpoints,
		Workspaces: cfg.Workspaces, GitHubApp: cfg.gitHubApp(),
	}, slog.New(slog.DiscardHandler), reg)
	if err != nil {
		t.Fatal(err)
	}
	var ready func() error
	if p.role != "gateway" {
		_, ready = st.Workers()
	}
	a := assembled{reg: reg}
	switch p.role {
	case "gateway", "serve":
		gw, err := buildGateway(&cfg, st, ready)
		if err != nil {
			t.Fatalf("wakegate %s would not start: %v", p.role, err)
		}
		a.handler = gw.Handler()
	case "worker":
		// serveAdmin listens itself: give it a free loopback port.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		_ = ln.Close()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- serveAdmin(ctx, ctx.Done(), addr, rdb, reg, ready, slog.New(slog.DiscardHandler)) }()
		t.Cleanup(func() { cancel(); <-done })
		a.handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var resp *http.Response
			var err error
			for range 50 { // until serveAdmin listens
				if resp, err = http.Get("http://" + addr + r.URL.Path); err == nil {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if err != nil {
				t.Fatalf("worker admin server: %v", err)
			}
			defer resp.Body.Close()
			w.WriteHeader(resp.StatusCode)
			_, _ = io.Copy(w, resp.Body)
		})
	}
	return a
}

// checkProbe: the process serves path (liveness: 200; readiness: a route,
// 200 or 503).
func checkProbe(t *testing.T, where string, a assembled, path string, liveness bool) {
	t.Helper()
	rec := httptest.NewRecorder()
	a.handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	switch {
	case rec.Code == http.StatusNotFound:
		t.Errorf("%s: probe path %s is not a route wakegate serves (404)", where, path)
	case liveness && rec.Code != http.StatusOK:
		t.Errorf("%s: liveness probe %s answers %d on a healthy process", where, path, rec.Code)
	case rec.Code != http.StatusOK && rec.Code != http.StatusServiceUnavailable:
		t.Errorf("%s: probe %s answers %d", where, path, rec.Code)
	}
}

// --- YAML -------------------------------------------------------------

func readYAML(t *testing.T, file string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var docs []map[string]any
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		var d map[string]any
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if d != nil {
			docs = append(docs, d)
		}
	}
	return docs
}

// get walks m along keys (map keys, or list indexes as numbers).
func get(v any, keys ...any) any {
	for _, k := range keys {
		switch key := k.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[key]
		case int:
			l, ok := v.([]any)
			if !ok || key >= len(l) {
				return nil
			}
			v = l[key]
		}
	}
	return v
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func list(v any) []any {
	l, _ := v.([]any)
	return l
}

func strList(t *testing.T, where string, v any) []string {
	t.Helper()
	var out []string
	for _, x := range list(v) {
		s, ok := x.(string)
		if !ok {
			t.Fatalf("%s: %v is not a string", where, x)
		}
		out = append(out, s)
	}
	return out
}

func num(v any) (int, bool) {
	switch n := v.(type) {
	case int:
		return n, true
	case int64:
		return int(n), true
	case uint64:
		return int(n), true
	case float64:
		return int(n), n == float64(int(n))
	}
	return 0, false
}

func strMap(v any) map[string]string {
	out := map[string]string{}
	m, _ := v.(map[string]any)
	for k, x := range m {
		out[k] = fmt.Sprint(x)
	}
	return out
}

// --- Dockerfile -----------------------------------------------------------

type dockerfile struct {
	goVersion  string // of the build stage's golang image
	buildPkg   string // what go build builds
	buildTags  string // its -tags
	entrypoint []string
	user       string // the final stage's USER
	expose     []int
}

func readDockerfile(t *testing.T) dockerfile {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(deployDir, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var d dockerfile
	var joined []string // continuation lines joined
	var cur string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		if strings.HasSuffix(line, `\`) {
			cur += strings.TrimSuffix(line, `\`) + " "
			continue
		}
		joined = append(joined, cur+line)
		cur = ""
	}
	for _, line := range joined {
		instr, rest, _ := strings.Cut(line, " ")
		switch strings.ToUpper(instr) {
		case "FROM":
			d.user = "" // USER is per stage: the last stage's counts
			if m := regexp.MustCompile(`golang:(\d+\.\d+)`).FindStringSubmatch(rest); m != nil {
				d.goVersion = m[1]
			}
		case "RUN":
			if m := regexp.MustCompile(`go build .*?(\./\S+)\s*$`).FindStringSubmatch(rest); m != nil {
				d.buildPkg = m[1]
			}
			if m := regexp.MustCompile(`go build .*?-tags[ =](\S+)`).FindStringSubmatch(rest); m != nil {
				d.buildTags = m[1]
			}
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(rest), &d.entrypoint); err != nil {
				t.Fatalf("Dockerfile: ENTRYPOINT %s: want the exec form [\"wakegate\"]", rest)
			}
		case "USER":
			d.user = strings.TrimSpace(rest)
		case "EXPOSE":
			for _, p := range strings.Fields(rest) {
				n, err := strconv.Atoi(strings.TrimSuffix(p, "/tcp"))
				if err != nil {
					t.Fatalf("Dockerfile: EXPOSE %s", p)
				}
				d.expose = append(d.expose, n)
			}
		}
	}
	return d
}

// TestDockerfile: the image builds this binary with the Go of go.mod, runs
// it as a numeric non-root user, exposes the default ports.
func TestDockerfile(t *testing.T) {
	d := readDockerfile(t)
	mod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(mod)
	if m == nil || d.goVersion != string(m[1]) {
		t.Errorf("Dockerfile builds with golang:%s, go.mod says go %s", d.goVersion, m[1])
	}
	if d.buildPkg != "./cmd/wakegate" {
		t.Errorf("Dockerfile builds %q, want ./cmd/wakegate", d.buildPkg)
	}
	if !slices.Contains(strings.Split(d.buildTags, ","), "nomsgpack") {
		t.Errorf("Dockerfile builds with -tags %q, want nomsgpack (Gin without MessagePack)", d.buildTags)
	}
	if _, err := os.Stat("../../" + d.buildPkg + "/main.go"); err != nil {
		t.Errorf("Dockerfile builds %s: %v", d.buildPkg, err)
	}
	if !slices.Equal(d.entrypoint, []string{"wakegate"}) {
		t.Errorf("Dockerfile ENTRYPOINT %q, want [\"wakegate\"] (manifests give the subcommand as arguments)", d.entrypoint)
	}
	if uid := dockerUID(t, d); uid == 0 {
		t.Errorf("Dockerfile runs as root")
	}
	for _, env := range []string{"WAKEGATE_ADDR", "WAKEGATE_WORKER_ADDR"} {
		if p := defaultPort(t, env); !slices.Contains(d.expose, p) {
			t.Errorf("Dockerfile EXPOSE %v lacks %d, %s's default", d.expose, p, env)
		}
	}
	// The build context is the repository root; .dockerignore must keep
	// what the build reads.
	ignore, _ := os.ReadFile("../../.dockerignore")
	for _, line := range strings.Split(string(ignore), "\n") {
		line = strings.Trim(strings.TrimSpace(line), "/")
		for _, need := range []string{"go.mod", "go.sum", "cmd", "delivery", "gateway", "providers", "workers"} {
			if line == need || line == "*" {
				t.Errorf(".dockerignore excludes %s, which the image build needs", line)
			}
		}
	}
}

func dockerUID(t *testing.T, d dockerfile) int {
	t.Helper()
	u, _, _ := strings.Cut(d.user, ":")
	uid, err := strconv.Atoi(u)
	if err != nil {
		t.Fatalf("Dockerfile USER %q: want a numeric uid (Kubernetes' runAsNonRoot cannot check a name)", d.user)
	}
	return uid
}

func defaultPort(t *testing.T, env string) int {
	t.Helper()
	for _, s := range settings() {
		if s.env == env {
			_, p, _ := net.SplitHostPort(s.def)
			n, err := strconv.Atoi(p)
			if err != nil {
				t.Fatalf("%s default %q", env, s.def)
			}
			return n
		}
	}
	t.Fatalf("no setting %s", env)
	return 0
}

// --- compose ---------------------------------------------------------------

// interpolate resolves compose's ${VAR}, ${VAR:-default}, ${VAR-default},
// ${VAR:?message} and ${VAR?message} with an empty environment; a
// required one becomes req.
func interpolate(s, req string) string {
	re := regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}`)
	return re.ReplaceAllStringFunc(s, func(m string) string {
		g := re.FindStringSubmatch(m)
		switch g[2] {
		case ":-", "-":
			return g[3]
		case ":?", "?":
			return req
		}
		return ""
	})
}

// TestComposeFile: deployments/compose.yaml runs Redis with AOF everysec,
// two gateways and two workers of the image the Dockerfile builds, each
// with arguments, environment and ports the binary accepts.
func TestComposeFile(t *testing.T) {
	file := filepath.Join(deployDir, "compose.yaml")
	docs := readYAML(t, file)
	if len(docs) != 1 {
		t.Fatalf("%s: %d documents", file, len(docs))
	}
	services, _ := docs[0]["services"].(map[string]any)
	d := readDockerfile(t)
	uid := dockerUID(t, d)
	count := map[string]int{}
	hostPorts := map[string]string{}
	images := map[string]bool{}
	redisService := ""
	var shards []int
	for name, v := range services {
		svc, _ := v.(map[string]any)
		where := "compose.yaml: " + name
		if strings.HasPrefix(str(svc["image"]), "redis:") {
			redisService = name
			cmd := strings.Join(strList(t, where, svc["command"]), " ")
			if !strings.Contains(cmd, "--appendonly yes") || !strings.Contains(cmd, "--appendfsync everysec") {
				t.Errorf("%s: command %q: want --appendonly yes --appendfsync everysec", where, cmd)
			}
			continue
		}
		// A wakegate service: the image the Dockerfile builds.
		if df := str(get(svc, "build", "dockerfile")); path.Clean(path.Join(str(get(svc, "build", "context")), df)) != path.Clean("../deployments/Dockerfile") {
			t.Errorf("%s: builds %s from %s, want deployments/Dockerfile from the repository root (..)", where, df, get(svc, "build", "context"))
		}
		images[str(svc["image"])] = true
		if ep := svc["entrypoint"]; ep != nil {
			t.Errorf("%s: entrypoint %v replaces the image's [\"wakegate\"]", where, ep)
		}
		if u, _, _ := strings.Cut(str(svc["user"]), ":"); u != strconv.Itoa(uid) {
			t.Errorf("%s: user %q, want the image's %d", where, svc["user"], uid)
		}
		if svc["read_only"] != true {
			t.Errorf("%s: want read_only: true (wakegate writes no files)", where)
		}
		if c := str(get(svc, "depends_on", "redis", "condition")); c != "service_healthy" {
			t.Errorf("%s: want depends_on redis: service_healthy, got %q", where, c)
		}
		c := container{where: where, env: map[string]string{}, files: map[string]string{}}
		c.args = strList(t, where, svc["command"])
		switch e := svc["environment"].(type) {
		case map[string]any:
			for k, x := range e {
				c.env[k] = interpolate(fmt.Sprint(x), placeholder(k))
			}
		case []any:
			for _, x := range e {
				k, val, _ := strings.Cut(fmt.Sprint(x), "=")
				c.env[k] = interpolate(val, placeholder(k))
			}
		}
		for k, val := range c.env {
			if strings.HasSuffix(k, "_FILE") {
				c.files[k] = val
			}
		}
		p := start(t, c)
		count[p.role]++
		shards = append(shards, p.cfg.Shards)
		if u, err := redisHost(p.cfg.RedisURL); err == nil && p.role != "serve" {
			if _, ok := services[u]; !ok {
				t.Errorf("%s: WAKEGATE_REDIS_URL names host %q, not a service of this file", where, u)
			}
		}
		// Ports: every published container port is the process's.
		for _, x := range list(svc["ports"]) {
			hostIP, host, target := composePort(t, where, x)
			if target != p.listen {
				t.Errorf("%s: publishes container port %d, but wakegate %s listens on %d", where, target, p.role, p.listen)
			}
			if other, dup := hostPorts[hostIP+":"+host]; dup && host != "" {
				t.Errorf("%s and %s both publish host port %s", other, name, host)
			}
			hostPorts[hostIP+":"+host] = name
		}
		if p.role == "gateway" && len(list(svc["ports"])) == 0 {
			t.Errorf("%s: a gateway must publish its port (%d)", where, p.listen)
		}
		a := assemble(t, p)
		checkProbe(t, where, a, "/healthz", true)
		checkProbe(t, where, a, "/readyz", false)
	}
	if count["gateway"] < 2 || count["worker"] < 2 {
		t.Errorf("compose.yaml runs %d gateways and %d workers; want two of each", count["gateway"], count["worker"])
	}
	if len(images) != 1 {
		t.Errorf("compose.yaml: wakegate services use images %v; want one", images)
	}
	// The same image name as Kubernetes'.
	for _, k := range readYAML(t, filepath.Join(deployDir, "k8s", "kustomization.yaml")) {
		for _, im := range list(k["images"]) {
			for img := range images {
				if repo, _, _ := strings.Cut(img, ":"); repo != str(get(im, "name")) {
					t.Errorf("compose.yaml builds %s, the Kubernetes manifests run %s", img, get(im, "name"))
				}
			}
		}
	}
	if redisService == "" {
		t.Fatal("compose.yaml: no redis service")
	}
	conf, err := os.ReadFile(filepath.Join(deployDir, "redis.conf"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"appendonly yes", "appendfsync everysec", "maxmemory-policy noeviction"} {
		if !regexp.MustCompile(`(?m)^` + want + `\s*$`).Match(conf) {
			t.Errorf("redis.conf: no %q", want)
		}
	}
	// wakegate bench's private Redis runs with the same AOF settings.
	for i := 0; i+1 < len(bench.RedisAOF); i += 2 {
		want := strings.TrimPrefix(bench.RedisAOF[i], "--") + " " + bench.RedisAOF[i+1]
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(want) + `\s*$`).Match(conf) {
			t.Errorf("redis.conf: no %q, which wakegate bench's private Redis runs with", want)
		}
	}
	checkShardsAlert(t, "compose.yaml", shards)
}

// redisHost is the host of a redis:// URL.
func redisHost(raw string) (string, error) {
	_, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return "", errors.New("no scheme")
	}
	if _, after, ok := strings.Cut(rest, "@"); ok {
		rest = after
	}
	hostport, _, _ := strings.Cut(rest, "/")
	host, _, err := net.SplitHostPort(hostport)
	return host, err
}

// composePort reads a ports entry, short ("[ip:][host:]container[/tcp]")
// or long ({target, published, host_ip}).
func composePort(t *testing.T, where string, v any) (hostIP, host string, target int) {
	t.Helper()
	if m, ok := v.(map[string]any); ok {
		n, _ := num(m["target"])
		return str(m["host_ip"]), fmt.Sprint(m["published"]), n
	}
	s, _, _ := strings.Cut(fmt.Sprint(v), "/")
	parts := strings.Split(s, ":")
	n, err := strconv.Atoi(parts[len(parts)-1])
	if err != nil {
		t.Fatalf("%s: ports entry %q", where, v)
	}
	switch len(parts) {
	case 2:
		host = parts[0]
	case 3:
		hostIP, host = parts[0], parts[1]
	}
	return hostIP, host, n
}

// --- Kubernetes ---------------------------------------------------------------

type k8sDoc struct {
	file string
	obj  map[string]any
}

func (d k8sDoc) kind() string { return str(d.obj["kind"]) }
func (d k8sDoc) name() string { return str(get(d.obj, "metadata", "name")) }
func (d k8sDoc) where() string {
	return fmt.Sprintf("k8s/%s: %s %s", d.file, d.kind(), d.name())
}

// TestKubernetesManifests: deployments/k8s runs gateways and workers of one
// image with arguments, environment, ports and probes the binary accepts,
// secrets from the Secret as files, disruption budgets, services,
// resources and a locked-down security context.
func TestKubernetesManifests(t *testing.T) {
	dir := filepath.Join(deployDir, "k8s")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var docs []k8sDoc
	var files []string
	var kust map[string]any
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".yaml") {
			continue
		}
		for _, obj := range readYAML(t, filepath.Join(dir, e.Name())) {
			if str(obj["kind"]) == "Kustomization" {
				kust = obj
				continue
			}
			docs = append(docs, k8sDoc{e.Name(), obj})
		}
		if e.Name() != "kustomization.yaml" && e.Name() != "secret.example.yaml" {
			files = append(files, e.Name())
		}
	}
	if kust == nil {
		t.Fatal("k8s: no kustomization.yaml")
	}
	if res := strList(t, "kustomization.yaml", kust["resources"]); !equalSets(res, files) {
		t.Errorf("kustomization.yaml lists %v; the manifests are %v (secret.example.yaml stays out)", res, files)
	}
	image := ""
	for _, im := range list(kust["images"]) {
		image = str(get(im, "name"))
	}
	byKind := map[string][]k8sDoc{}
	for _, d := range docs {
		byKind[d.kind()] = append(byKind[d.kind()], d)
	}
	if ns := byKind["Namespace"]; len(ns) == 1 && ns[0].name() != str(kust["namespace"]) {
		t.Errorf("kustomization.yaml puts everything in %q, the Namespace is %q", kust["namespace"], ns[0].name())
	}
	find := func(kind, name string) map[string]any {
		for _, d := range byKind[kind] {
			if d.name() == name {
				return d.obj
			}
		}
		return nil
	}
	uid := dockerUID(t, readDockerfile(t))
	count := map[string]int{}
	var shards []int
	for _, dep := range byKind["Deployment"] {
		where := dep.where()
		spec, _ := dep.obj["spec"].(map[string]any)
		replicas, _ := num(spec["replicas"])
		if replicas < 2 {
			t.Errorf("%s: %d replicas; run at least two", where, replicas)
		}
		podLabels := strMap(get(spec, "template", "metadata", "labels"))
		if sel := strMap(get(spec, "selector", "matchLabels")); len(sel) == 0 || !subset(sel, podLabels) {
			t.Errorf("%s: selector %v does not select its pods %v", where, sel, podLabels)
		}
		pod, _ := get(spec, "template", "spec").(map[string]any)
		if get(pod, "securityContext", "runAsNonRoot") != true {
			t.Errorf("%s: want securityContext.runAsNonRoot: true", where)
		}
		if u, ok := num(get(pod, "securityContext", "runAsUser")); ok && u != uid {
			t.Errorf("%s: runAsUser %d, the image's user is %d", where, u, uid)
		}
		volumes := map[string]map[string]any{}
		for _, v := range list(pod["volumes"]) {
			volumes[str(get(v, "name"))] = v.(map[string]any)
		}
		containers := list(pod["containers"])
		if len(containers) != 1 {
			t.Fatalf("%s: %d containers, want one", where, len(containers))
		}
		ctr, _ := containers[0].(map[string]any)
		where += " container " + str(ctr["name"])
		if img, _, _ := strings.Cut(str(ctr["image"]), ":"); img != image || image == "" {
			t.Errorf("%s: image %q; kustomization.yaml rewrites %q", where, ctr["image"], image)
		}
		if cmd := ctr["command"]; cmd != nil {
			t.Errorf("%s: command %v replaces the image's ENTRYPOINT; give the subcommand in args", where, cmd)
		}
		c := container{where: where, env: map[string]string{}, files: map[string]string{}}
		c.args = strList(t, where, ctr["args"])
		// envFrom, then env (env wins, as in Kubernetes).
		for _, ef := range list(ctr["envFrom"]) {
			if n := str(get(ef, "configMapRef", "name")); n != "" {
				cm := find("ConfigMap", n)
				if cm == nil {
					t.Fatalf("%s: envFrom ConfigMap %s: no such manifest", where, n)
				}
				data, _ := cm["data"].(map[string]any)
				for k, v := range data {
					s, ok := v.(string)
					if !ok {
						t.Errorf("%s: ConfigMap %s: %s is %T; Kubernetes wants strings (quote it)", where, n, k, v)
					}
					c.env[k] = s
				}
			}
			if n := str(get(ef, "secretRef", "name")); n != "" {
				t.Errorf("%s: envFrom Secret %s: mount the Secret and use <NAME>_FILE", where, n)
			}
		}
		for _, e := range list(ctr["env"]) {
			name := str(get(e, "name"))
			switch {
			case get(e, "valueFrom", "secretKeyRef") != nil:
				ref := get(e, "valueFrom", "secretKeyRef")
				checkSecretKey(t, where, find("Secret", str(get(ref, "name"))), str(get(ref, "name")), str(get(ref, "key")))
				if !isSecret(name) && strings.HasPrefix(name, "WAKEGATE_") {
					t.Errorf("%s: %s comes from a Secret but is not a secret setting", where, name)
				}
				c.env[name] = placeholder(name)
			case get(e, "valueFrom", "configMapKeyRef") != nil:
				ref := get(e, "valueFrom", "configMapKeyRef")
				cm := find("ConfigMap", str(get(ref, "name")))
				if cm == nil || get(cm, "data", str(get(ref, "key"))) == nil {
					t.Errorf("%s: %s from ConfigMap %s key %s: no such key", where, name, get(ref, "name"), get(ref, "key"))
				}
				c.env[name] = str(get(cm, "data", str(get(ref, "key"))))
			default:
				s, ok := e.(map[string]any)["value"].(string)
				if !ok {
					t.Errorf("%s: %s's value is not a string (quote it)", where, name)
				}
				c.env[name] = s
			}
		}
		for name, v := range c.env {
			if strings.HasPrefix(name, "WAKEGATE_") && isSecret(name) {
				t.Errorf("%s: secret %s in plain configuration; use %s_FILE from the Secret", where, name, name)
			}
			if strings.HasSuffix(name, "_FILE") && strings.HasPrefix(name, "WAKEGATE_") {
				c.files[name] = v
				checkSecretFile(t, where, name, v, ctr, volumes, find)
			}
		}
		p := start(t, c)
		count[p.role]++
		shards = append(shards, p.cfg.Shards)
		if p.role == "gateway" {
			for _, need := range []string{"WAKEGATE_GITHUB_WEBHOOK_SECRETS", "WAKEGATE_JWT_HS256_SECRET"} {
				if c.files[need+"_FILE"] == "" && c.env[need] == "" {
					t.Errorf("%s: the gateway needs %s (or _FILE)", where, need)
				}
			}
		}
		// Ports and probes: on the port the process listens on.
		ports := map[string]int{}
		var numbers []int
		for _, p := range list(ctr["ports"]) {
			n, _ := num(get(p, "containerPort"))
			ports[str(get(p, "name"))] = n
			numbers = append(numbers, n)
		}
		if !slices.Contains(numbers, p.listen) {
			t.Errorf("%s: container ports %v lack %d, where wakegate %s listens", where, numbers, p.listen, p.role)
		}
		resolve := func(port any) int {
			if n, ok := num(port); ok {
				return n
			}
			n, ok := ports[str(port)]
			if !ok {
				t.Errorf("%s: no container port named %v", where, port)
			}
			return n
		}
		a := assemble(t, p)
		for probe, want := range map[string]string{"livenessProbe": "/healthz", "readinessProbe": "/readyz"} {
			hg := get(ctr, probe, "httpGet")
			if hg == nil {
				t.Errorf("%s: no %s.httpGet", where, probe)
				continue
			}
			if got := str(get(hg, "path")); got != want {
				t.Errorf("%s: %s path %s, want %s", where, probe, got, want)
			}
			if port := resolve(get(hg, "port")); port != p.listen {
				t.Errorf("%s: %s on port %d, but wakegate %s listens on %d", where, probe, port, p.role, p.listen)
			}
			checkProbe(t, where+" "+probe, a, str(get(hg, "path")), probe == "livenessProbe")
		}
		if ann := strMap(get(spec, "template", "metadata", "annotations")); ann["prometheus.io/port"] != "" &&
			ann["prometheus.io/port"] != strconv.Itoa(p.listen) {
			t.Errorf("%s: prometheus.io/port %s, but /metrics is on %d", where, ann["prometheus.io/port"], p.listen)
		}
		for _, res := range []string{"requests", "limits"} {
			for _, r := range []string{"cpu", "memory"} {
				if get(ctr, "resources", res, r) == nil {
					t.Errorf("%s: no resources.%s.%s", where, res, r)
				}
			}
		}
		sc := get(ctr, "securityContext")
		if get(sc, "readOnlyRootFilesystem") != true || get(sc, "allowPrivilegeEscalation") != false {
			t.Errorf("%s: want readOnlyRootFilesystem: true and allowPrivilegeEscalation: false", where)
		}
		if !slices.Contains(strList(t, where, get(sc, "capabilities", "drop")), "ALL") {
			t.Errorf("%s: want capabilities.drop [ALL]", where)
		}
		// A Service and a PodDisruptionBudget select these pods.
		svcs := 0
		for _, s := range byKind["Service"] {
			sel := strMap(get(s.obj, "spec", "selector"))
			if len(sel) == 0 || !subset(sel, podLabels) {
				continue
			}
			svcs++
			for _, sp := range list(get(s.obj, "spec", "ports")) {
				target := get(sp, "targetPort")
				if target == nil {
					target = get(sp, "port")
				}
				if n := resolve(target); !slices.Contains(numbers, n) {
					t.Errorf("%s: targetPort %v is not a port of %s", s.where(), target, where)
				}
			}
		}
		if svcs == 0 {
			t.Errorf("%s: no Service selects it", where)
		}
		pdbs := 0
		for _, b := range byKind["PodDisruptionBudget"] {
			sel := strMap(get(b.obj, "spec", "selector", "matchLabels"))
			if len(sel) == 0 || !subset(sel, podLabels) {
				continue
			}
			pdbs++
			if min, ok := num(get(b.obj, "spec", "minAvailable")); ok && min >= replicas {
				t.Errorf("%s: minAvailable %d of %d replicas blocks every drain", b.where(), min, replicas)
			}
		}
		if pdbs != 1 {
			t.Errorf("%s: %d PodDisruptionBudgets select it, want one", where, pdbs)
		}
	}
	if count["gateway"] < 1 || count["worker"] < 1 {
		t.Errorf("k8s: %d gateway and %d worker Deployments; want both", count["gateway"], count["worker"])
	}
	checkShardsAlert(t, "k8s", shards)
	// With kubectl at hand, kustomize builds the whole set.
	if kubectl, err := exec.LookPath("kubectl"); err == nil {
		out, err := exec.Command(kubectl, "kustomize", dir).CombinedOutput()
		if err != nil {
			t.Errorf("kubectl kustomize %s: %v\n%s", dir, err, out)
		} else if n := bytes.Count(out, []byte("\nkind: Deployment\n")); n != len(byKind["Deployment"]) {
			t.Errorf("kubectl kustomize %s: %d Deployments, want %d", dir, n, len(byKind["Deployment"]))
		}
	} else {
		t.Log("kubectl not installed: kustomization.yaml not built")
	}
}

// checkSecretFile: a <NAME>_FILE path is a key of the Secret, mounted
// read-only from a secret volume.
func checkSecretFile(t *testing.T, where, name, file string, ctr map[string]any, volumes map[string]map[string]any,
	find func(kind, name string) map[string]any) {
	t.Helper()
	for _, m := range list(ctr["volumeMounts"]) {
		mount := str(get(m, "mountPath"))
		rel, err := filepath.Rel(mount, file)
		if err != nil || strings.HasPrefix(rel, "..") {
			continue
		}
		if get(m, "readOnly") != true {
			t.Errorf("%s: mount %s of %s is not readOnly", where, mount, name)
		}
		vol := volumes[str(get(m, "name"))]
		secretName := str(get(vol, "secret", "secretName"))
		if secretName == "" {
			t.Errorf("%s: %s=%s is on volume %s, not a Secret", where, name, file, get(m, "name"))
			return
		}
		key := rel
		if items := list(get(vol, "secret", "items")); items != nil {
			key = ""
			for _, it := range items {
				if str(get(it, "path")) == rel {
					key = str(get(it, "key"))
				}
			}
			if key == "" {
				t.Errorf("%s: %s=%s: the volume's items project no %s", where, name, file, rel)
				return
			}
		}
		checkSecretKey(t, where, find("Secret", secretName), secretName, key)
		return
	}
	t.Errorf("%s: %s=%s is under no volume mount", where, name, file)
}

func checkSecretKey(t *testing.T, where string, secret map[string]any, name, key string) {
	t.Helper()
	if secret == nil {
		t.Errorf("%s: Secret %s: no such manifest (secret.example.yaml lists its keys)", where, name)
		return
	}
	if get(secret, "stringData", key) == nil && get(secret, "data", key) == nil {
		t.Errorf("%s: Secret %s has no key %s", where, name, key)
	}
}

func subset(a, b map[string]string) bool {
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func equalSets(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// checkShardsAlert: the alert on unrouted shards compares with the
// deployment's WAKEGATE_JOURNAL_SHARDS.
func checkShardsAlert(t *testing.T, where string, shards []int) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(deployDir, "prometheus", "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`sum\(wakegate_route_shards_held\)\s*<\s*(\d+)`).FindSubmatch(b)
	if m == nil {
		t.Fatal("alerts.yaml: no rule sum(wakegate_route_shards_held) < N")
	}
	n, _ := strconv.Atoi(string(m[1]))
	for _, s := range shards {
		if s != n {
			t.Errorf("%s runs %d journal shards, the alert WakegateJournalShardsUnrouted expects %d", where, s, n)
		}
	}
}

// TestDeploymentTexts: every WAKEGATE_* name anywhere under deployments/
// (manifests, comments, READMEs) is one the binary reads.
func TestDeploymentTexts(t *testing.T) {
	accepted := acceptedEnv()
	re := regexp.MustCompile(`WAKEGATE_[A-Z0-9]+(?:_[A-Z0-9]+)*`)
	err := filepath.WalkDir(deployDir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, name := range re.FindAllString(string(b), -1) {
			if !accepted[name] {
				t.Errorf("%s: %s is not a variable wakegate reads", p, name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// --- Prometheus ---------------------------------------------------------------

// registered is every metric family a fully assembled process exposes at
// start — a stack with the GitHub App, its workers and gateway, probed
// once — with its type and series' labels; and the names registered
// anywhere in the Go sources (vectors with no series yet).
type registered struct {
	families map[string]*dto.MetricFamily
	inSource map[string]bool
}

func registeredMetrics(t *testing.T) registered {
	t.Helper()
	_, pem := apptest.Key()
	cfg := &config{RedisPrefix: "wg", Shards: 16, Workspaces: "*=default", WebhookSecrets: []string{"s"}, JWTSecret: "j",
		IngestLimits: "workspace=5000/s,token=1000/s", MaxBody: "25MB",
		GitHubAppID: apptest.AppID, GitHubAppKey: string(pem), GitHubAPIURL: app.DefaultAPIURL}
	a := assemble(t, process{role: "serve", cfg: cfg})
	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		a.handler.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, p, nil))
	}
	mfs, err := a.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	r := registered{families: map[string]*dto.MetricFamily{}, inSource: map[string]bool{}}
	for _, mf := range mfs {
		r.families[mf.GetName()] = mf
	}
	re := regexp.MustCompile(`Name:\s*"(wakegate_[a-z0-9_]+)"`)
	err = filepath.WalkDir("../..", func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "deployments") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range re.FindAllSubmatch(b, -1) {
			r.inSource[string(m[1])] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// family finds the family a PromQL metric name belongs to (histograms
// expose _bucket, _sum and _count; a counter registered without _total is
// exposed with it).
func (r registered) family(name string) (*dto.MetricFamily, bool) {
	if mf, ok := r.families[name]; ok {
		return mf, true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count", "_total"} {
		base, ok := strings.CutSuffix(name, suffix)
		if !ok {
			continue
		}
		mf, ok := r.families[base]
		if !ok {
			continue
		}
		switch t := mf.GetType(); {
		case suffix == "_total" && t == dto.MetricType_COUNTER,
			suffix == "_bucket" && t == dto.MetricType_HISTOGRAM,
			suffix != "_bucket" && suffix != "_total" && (t == dto.MetricType_HISTOGRAM || t == dto.MetricType_SUMMARY):
			return mf, true
		}
	}
	return nil, false
}

var (
	selectorRe = regexp.MustCompile(`([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{([^}]*)\}`)
	matcherRe  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"([^"]*)"`)
	groupingRe = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	tokenRe    = regexp.MustCompile(`[0-9][0-9a-zA-Z_.]*|[a-zA-Z_:][a-zA-Z0-9_:]*\s*\(?`)
	keywords   = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true, "inf": true, "nan": true,
		"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}
)

// exprMetrics returns the metric names an expression selects and, for
// each selector with label matchers, the matchers.
func exprMetrics(expr string) (names []string, matchers map[string][][3]string) {
	matchers = map[string][][3]string{}
	for _, m := range selectorRe.FindAllStringSubmatch(expr, -1) {
		for _, lm := range matcherRe.FindAllStringSubmatch(m[2], -1) {
			matchers[m[1]] = append(matchers[m[1]], [3]string{lm[1], lm[2], lm[3]})
		}
	}
	e := regexp.MustCompile(`\{[^}]*\}|\[[^\]]*\]|"[^"]*"`).ReplaceAllString(expr, " ")
	e = groupingRe.ReplaceAllString(e, " ")
	for _, tok := range tokenRe.FindAllString(e, -1) {
		if tok[0] >= '0' && tok[0] <= '9' || strings.HasSuffix(tok, "(") || keywords[strings.TrimSpace(tok)] {
			continue // a number or duration, a function or aggregation, a keyword
		}
		names = append(names, strings.TrimSpace(tok))
	}
	return names, matchers
}

// privateLabels are label names that would carry tenant, party or
// repository names (docs/design.md §11: never).
var privateLabels = []string{"workspace", "tenant", "party", "recipient", "session", "subject", "repo", "repository", "org", "owner", "url", "endpoint"}

// TestAlertRules: deployments/prometheus/alerts.yaml covers the faults that
// matter with metrics the binary registers — names, types and label values
// it actually exports — and no metric carries a private label.
func TestAlertRules(t *testing.T) {
	file := filepath.Join(deployDir, "prometheus", "alerts.yaml")
	docs := readYAML(t, file)
	if len(docs) != 1 {
		t.Fatalf("%s: %d documents", file, len(docs))
	}
	reg := registeredMetrics(t)
	for name, mf := range reg.families {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if slices.Contains(privateLabels, l.GetName()) {
					t.Errorf("metric %s has the label %q: labels never carry tenant, party or repo names", name, l.GetName())
				}
			}
		}
	}
	used := map[string]bool{}
	names := map[string]bool{}
	for gi, g := range list(docs[0]["groups"]) {
		rules := list(get(g, "rules"))
		if str(get(g, "name")) == "" || len(rules) == 0 {
			t.Errorf("alerts.yaml: group %d has no name or no rules", gi)
		}
		for _, r := range rules {
			alert, expr := str(get(r, "alert")), str(get(r, "expr"))
			where := "alerts.yaml: " + alert
			if alert == "" || expr == "" {
				t.Errorf("alerts.yaml: a rule without alert or expr: %v", r)
				continue
			}
			if names[alert] {
				t.Errorf("%s: defined twice", where)
			}
			names[alert] = true
			if f := get(r, "for"); f != nil {
				if _, err := time.ParseDuration(str(f)); err != nil {
					t.Errorf("%s: for %v: %v", where, f, err)
				}
			}
			if s := str(get(r, "labels", "severity")); s != "critical" && s != "warning" && s != "info" {
				t.Errorf("%s: severity %q, want critical, warning or info", where, s)
			}
			if str(get(r, "annotations", "summary")) == "" || str(get(r, "annotations", "description")) == "" {
				t.Errorf("%s: want annotations summary and description", where)
			}
			metrics, matchers := exprMetrics(expr)
			if len(metrics) == 0 {
				t.Errorf("%s: no metric in %q", where, expr)
			}
			for _, name := range metrics {
				used[name] = true
				mf, ok := reg.family(name)
				if !ok {
					if reg.inSource[name] {
						continue // a vector with no series until first use: its label values cannot be checked
					}
					t.Errorf("%s: %s is not a metric wakegate registers", where, name)
					continue
				}
				for _, lm := range matchers[name] {
					if lm[1] != "=" {
						continue
					}
					if !hasSeries(mf, lm[0], lm[2]) {
						t.Errorf("%s: %s has no series with %s=%q (its label values are pre-set at start)", where, name, lm[0], lm[2])
					}
				}
			}
			// Grouping labels are the metric's, never private ones.
			for _, m := range groupingRe.FindAllString(expr, -1) {
				for _, l := range privateLabels {
					if regexp.MustCompile(`\b` + l + `\b`).MatchString(m) {
						t.Errorf("%s: groups by %s", where, l)
					}
				}
			}
		}
	}
	// The faults that matter (docs/design.md §11) each have a rule.
	for _, need := range []string{
		"wakegate_redis_up",                   // Redis unreachable: what /readyz checks
		"wakegate_route_undeliverable_total",  // undeliverable
		"wakegate_escalations_total",          // escalations to the human fallback
		"wakegate_push_dead_letters_total",    // dead letters
		"wakegate_route_lag_seconds",          // journal lag
		"wakegate_route_shards_held",          // journal shards not routed at all
		"wakegate_derive_lag_seconds",         // derive lag
		"wakegate_route_events_total",         // poison events
		"wakegate_derive_records_total",       // poison deliveries
		"wakegate_github_sweeps_total",        // the missed-delivery sweep failing
		"wakegate_gateway_store_errors_total", // ingress cannot commit
	} {
		if !used[need] {
			t.Errorf("alerts.yaml: no rule uses %s", need)
		}
	}
	// With promtool at hand (apt-get install prometheus), the rules also
	// parse and their unit tests pass.
	if promtool, err := exec.LookPath("promtool"); err == nil {
		for _, args := range [][]string{{"check", "rules", "alerts.yaml"}, {"test", "rules", "alerts_test.yaml"}} {
			cmd := exec.Command(promtool, args...)
			cmd.Dir = filepath.Join(deployDir, "prometheus")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
			}
		}
	} else if os.Getenv("WAKEGATE_REQUIRE_PROMTOOL") == "1" {
		t.Error("promtool not installed, and WAKEGATE_REQUIRE_PROMTOOL=1 (CI): apt-get install prometheus")
	} else {
		t.Log("promtool not installed: the rules' PromQL and deployments/prometheus/alerts_test.yaml not run")
	}
}

func hasSeries(mf *dto.MetricFamily, label, value string) bool {
	for _, m := range mf.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == label && l.GetValue() == value {
				return true
			}
		}
	}
	return false
}

// TestAlertMetricsWithAppOff: with the GitHub App off, the App metrics the
// alert rules read are registered at zero, every outcome a series, as with
// the App on: a rule never meets an absent series.
func TestAlertMetricsWithAppOff(t *testing.T) {
	cfg := &config{RedisPrefix: "wg", Shards: 16, Workspaces: "*=default", WebhookSecrets: []string{"s"}, JWTSecret: "j",
		IngestLimits: "workspace=5000/s,token=1000/s", MaxBody: "25MB"}
	a := assemble(t, process{role: "serve", cfg: cfg})
	mfs, err := a.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"wakegate_github_sweeps_total":            {"ok", "error", "busy"},
		"wakegate_github_failed_deliveries_total": {"redeliver_failed"},
		"wakegate_github_reconcile_ticks_total":   {"ok", "error"},
	}
	for _, mf := range mfs {
		outcomes, ok := want[mf.GetName()]
		if !ok {
			continue
		}
		for _, o := range outcomes {
			if !hasSeries(mf, "outcome", o) {
				t.Errorf("%s has no outcome=%q series with the App off", mf.GetName(), o)
			}
		}
		delete(want, mf.GetName())
	}
	for name := range want {
		t.Errorf("%s is not registered with the App off", name)
	}
}
