// Command summarize reads the JSON reports bench/run collected, laid out as
// DIR/r<round>/<peer>/<measurement>.json, and prints the median of each
// figure per peer and troupe's ratio to every other peer, per round and as
// the median of the rounds; then troupe's own tables: its process costs
// (DIR/r<round>/process) and its cluster (DIR/r<round>/cluster, the hop
// between nodes; DIR/cluster, the idle sessions one and three nodes hold).
// With -peers "" (bench/run's ONLY=cluster) only troupe's tables.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
)

type report struct {
	Calls       int64            `json:"calls"`
	OK          int64            `json:"ok"`
	Errors      map[string]int64 `json:"errors"`
	CallsPerSec float64          `json:"calls_per_sec"`
	Latency     struct {
		P50 float64 `json:"p50_us"`
		P99 float64 `json:"p99_us"`
	} `json:"latency"`
	StartupMs float64 `json:"startup_ms"`
	Server    *struct {
		CPUUsPerCall float64 `json:"cpu_us_per_call"`
		RSSStart     int64   `json:"rss_start_bytes"`
	} `json:"server"`
	// Stateless is the protocol version of calls made without a session
	// (troupe bench --stateless).
	Stateless       string `json:"stateless"`
	SessionsOpened  int    `json:"sessions_opened"`
	BytesPerSession int64  `json:"bytes_per_session"`
	Aborted         string `json:"aborted"`
	// PerURL is each URL's share of a run over several (the cluster's
	// idle sessions per node).
	PerURL []struct {
		URL      string `json:"url"`
		Sessions int    `json:"sessions"`
	} `json:"per_url"`
}

// metric is one row of the table: which report, which figure, and whether
// more is better.
type metric struct {
	name   string
	file   string
	higher bool
	get    func(*report) (float64, bool)
}

func cpu(r *report) (float64, bool) {
	if r.Server == nil || r.Server.CPUUsPerCall == 0 {
		return 0, false
	}
	return r.Server.CPUUsPerCall, true
}

var metrics = []metric{
	{"stdio calls/s, 1 in flight", "stdio1", true, func(r *report) (float64, bool) { return r.CallsPerSec, r.OK > 0 }},
	{"stdio p99 µs, 1 in flight", "stdio1", false, func(r *report) (float64, bool) { return r.Latency.P99, r.OK > 0 }},
	{"stdio calls/s, 32 in flight", "stdio32", true, func(r *report) (float64, bool) { return r.CallsPerSec, r.OK > 0 }},
	{"stdio p99 µs, 32 in flight", "stdio32", false, func(r *report) (float64, bool) { return r.Latency.P99, r.OK > 0 }},
	{"stdio server CPU µs/call (32 in flight)", "stdio32", false, cpu},
	{"HTTP calls/s, 32 sessions × 64 callers", "http", true, func(r *report) (float64, bool) { return r.CallsPerSec, r.OK > 0 }},
	{"HTTP p99 µs", "http", false, func(r *report) (float64, bool) { return r.Latency.P99, r.OK > 0 }},
	{"HTTP server CPU µs/call", "http", false, cpu},
	// The 2026-07-28 path: server/discover once, then tools/calls without
	// a session (there are no sessions to spread the callers over).
	{"HTTP stateless calls/s, 64 callers", "http_stateless", true, func(r *report) (float64, bool) { return r.CallsPerSec, r.OK > 0 }},
	{"HTTP stateless p99 µs", "http_stateless", false, func(r *report) (float64, bool) { return r.Latency.P99, r.OK > 0 }},
	{"HTTP stateless server CPU µs/call", "http_stateless", false, cpu},
	{"bytes per idle HTTP session", "idle", false, func(r *report) (float64, bool) {
		return float64(r.BytesPerSession), r.SessionsOpened > 0 && r.BytesPerSession > 0
	}},
	{"startup ms (start → initialize answer)", "stdio1", false, func(r *report) (float64, bool) { return r.StartupMs, r.StartupMs > 0 }},
	{"RSS after initialize, stdio (MiB)", "stdio1", false, func(r *report) (float64, bool) {
		if r.Server == nil || r.Server.RSSStart == 0 {
			return 0, false
		}
		return float64(r.Server.RSSStart) / (1 << 20), true
	}},
}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run is the command: it prints the tables to w and returns the exit code.
func run(args []string, w, stderr io.Writer) int {
	fs := flag.NewFlagSet("summarize", flag.ContinueOnError)
	fs.SetOutput(stderr)
	peersFlag := fs.String("peers", "troupe,floor,mcpgo,gosdk", "peers in column order; the first is compared with the others")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: summarize [-peers a,b,c] DIR")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil || fs.NArg() != 1 {
		if err == nil {
			fs.Usage()
		}
		return 2
	}
	dir := fs.Arg(0)
	var peers []string
	if *peersFlag != "" {
		peers = strings.Split(*peersFlag, ",")
	}

	roundDirs, _ := filepath.Glob(filepath.Join(dir, "r*"))
	var rounds []int
	for _, d := range roundDirs {
		if n, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(d), "r")); err == nil {
			rounds = append(rounds, n)
		}
	}
	sort.Ints(rounds)
	if len(rounds) == 0 {
		fmt.Fprintln(stderr, "summarize: no rounds under", dir)
		return 1
	}
	var problems []string
	if len(peers) > 0 {
		problems = peerTables(w, dir, peers, rounds)
	}
	problems = append(problems, processTable(w, dir, rounds)...)
	problems = append(problems, clusterTables(w, dir, rounds)...)
	if len(problems) > 0 {
		fmt.Fprintln(w, "\nProblems:")
		for _, p := range problems {
			fmt.Fprintln(w, "  "+p)
		}
	}
	return 0
}

// peerTables prints the peers' medians and troupe's ratios to each, and
// returns the problems it met.
func peerTables(w io.Writer, dir string, peers []string, rounds []int) (problems []string) {

	// val[metric][peer][round index] = value (NaN when missing).
	val := make([][][]float64, len(metrics))
	seen := map[string]bool{}
	for mi, m := range metrics {
		val[mi] = make([][]float64, len(peers))
		for pi, p := range peers {
			val[mi][pi] = make([]float64, len(rounds))
			for ri, r := range rounds {
				val[mi][pi][ri] = math.NaN()
				path := filepath.Join(dir, fmt.Sprintf("r%d", r), p, m.file+".json")
				rep, err := load(path)
				if err != nil {
					if !seen[path] {
						seen[path] = true
						problems = append(problems, fmt.Sprintf("round %d %s %s: %v", r, p, m.file, err))
					}
					continue
				}
				if !seen[path] {
					seen[path] = true
					if n := errCount(rep); n > 0 || rep.Aborted != "" {
						problems = append(problems, fmt.Sprintf("round %d %s %s: %d failed calls %v %s", r, p, m.file, n, rep.Errors, rep.Aborted))
					}
					if rep.Stateless != "" && rep.Stateless != statelessVersion {
						problems = append(problems, fmt.Sprintf("round %d %s %s: the calls spoke %s, not %s (the server has no server/discover)",
							r, p, m.file, rep.Stateless, statelessVersion))
					}
				}
				if v, ok := m.get(rep); ok {
					val[mi][pi][ri] = v
				}
			}
		}
	}

	fmt.Fprintf(w, "Medians of %d rounds (peers alternate, the starting peer rotates each round)\n\n", len(rounds))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "metric\t")
	for _, p := range peers {
		fmt.Fprintf(tw, "%s\t", p)
	}
	fmt.Fprintln(tw)
	for mi, m := range metrics {
		fmt.Fprintf(tw, "%s\t", m.name)
		for pi := range peers {
			fmt.Fprintf(tw, "%s\t", format(median(val[mi][pi])))
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()

	base := peers[0]
	for pi := 1; pi < len(peers); pi++ {
		fmt.Fprintf(w, "\n%s ÷ %s per round, and median of the rounds' ratios (↑: higher is better for %s, ↓: lower is)\n\n", base, peers[pi], base)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprint(tw, "metric\t")
		for _, r := range rounds {
			fmt.Fprintf(tw, "r%d\t", r)
		}
		fmt.Fprintln(tw, "median\t")
		for mi, m := range metrics {
			dirn := "↓"
			if m.higher {
				dirn = "↑"
			}
			fmt.Fprintf(tw, "%s %s\t", m.name, dirn)
			ratios := make([]float64, len(rounds))
			for ri := range rounds {
				ratios[ri] = val[mi][0][ri] / val[mi][pi][ri]
				fmt.Fprintf(tw, "%s\t", ratio(ratios[ri]))
			}
			fmt.Fprintf(tw, "%s\t\n", ratio(median(ratios)))
		}
		tw.Flush()
	}
	return problems
}

// statelessVersion is the revision the stateless rows are meant to
// measure; a peer that answered in an older one is named under Problems.
const statelessVersion = "2026-07-28"

func load(path string) (*report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &r, nil
}

func errCount(r *report) int64 {
	var n int64
	for _, c := range r.Errors {
		n += c
	}
	return n
}

// median of the values that are not NaN; NaN when there are none.
func median(vs []float64) float64 {
	var d []float64
	for _, v := range vs {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			d = append(d, v)
		}
	}
	if len(d) == 0 {
		return math.NaN()
	}
	slices.Sort(d)
	if len(d)%2 == 1 {
		return d[len(d)/2]
	}
	return (d[len(d)/2-1] + d[len(d)/2]) / 2
}

func format(v float64) string {
	switch {
	case math.IsNaN(v):
		return "-"
	case math.Abs(v) >= 100:
		return group(int64(math.Round(v)))
	case math.Abs(v) >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}

func ratio(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

// group writes n with thousands separators.
func group(n int64) string {
	if n < 0 {
		return "-" + group(-n)
	}
	s := strconv.FormatInt(n, 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// processRow is one row of troupe's process table: a figure of one report
// of DIR/r<round>/process, or the difference of two.
type processRow struct {
	name       string
	file, less string // less: subtract this report's figure (same field)
	get        func(*report) float64
}

var processRows = []processRow{
	{"fork/exec of /bin/true, p50 µs", "forkexec", "", p50},
	{"command tool /bin/true, profile none, p50 µs", "true_none", "", p50},
	{"command tool /bin/true, profile default, p50 µs", "true_default", "", p50},
	{"profile default − fork/exec, p50 µs", "true_default", "forkexec", p50},
	{"profile default − profile none, p50 µs", "true_default", "true_none", p50},
	{"cancel to process dead, p50 µs", "cancel", "", p50},
	{"cancel to process dead, p99 µs", "cancel", "", func(r *report) float64 { return r.Latency.P99 }},
}

func p50(r *report) float64 { return r.Latency.P50 }

// processTable prints troupe's process costs (bench/run measures them for
// troupe alone) and returns the problems it met.
func processTable(w io.Writer, dir string, rounds []int) (problems []string) {
	if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("r%d", rounds[0]), "process")); err != nil {
		return nil
	}
	fmt.Fprintf(w, "\ntroupe's process costs, one call at a time (per round, and median of the rounds)\n\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "metric\t")
	for _, r := range rounds {
		fmt.Fprintf(tw, "r%d\t", r)
	}
	fmt.Fprintln(tw, "median\t")
	seen := map[string]bool{}
	get := func(r int, file string, f func(*report) float64) float64 {
		path := filepath.Join(dir, fmt.Sprintf("r%d", r), "process", file+".json")
		rep, err := load(path)
		if err == nil && rep.OK == 0 {
			err = fmt.Errorf("no call succeeded %v", rep.Errors)
		}
		if err != nil {
			if !seen[path] {
				seen[path] = true
				problems = append(problems, fmt.Sprintf("round %d process %s: %v", r, file, err))
			}
			return math.NaN()
		}
		return f(rep)
	}
	for _, row := range processRows {
		fmt.Fprintf(tw, "%s\t", row.name)
		vals := make([]float64, len(rounds))
		for i, r := range rounds {
			vals[i] = get(r, row.file, row.get)
			if row.less != "" {
				vals[i] -= get(r, row.less, row.get)
			}
			fmt.Fprintf(tw, "%s\t", format(vals[i]))
		}
		fmt.Fprintf(tw, "%s\t\n", format(median(vals)))
	}
	tw.Flush()
	return problems
}

// hopRow is one row of the cluster's hop table: a figure of the calls sent
// to the node that owns their sessions ("local"), of those sent to
// another node that forwards them ("forwarded"), or forwarded − local.
type hopRow struct {
	name string
	file string // hop_local or hop_forwarded; "" for the difference
	get  func(*report) float64
}

func p99(r *report) float64 { return r.Latency.P99 }

var hopRows = []hopRow{
	{name: "sent to the owner, p50 µs", file: "hop_local", get: p50},
	{name: "sent to another node, p50 µs", file: "hop_forwarded", get: p50},
	{name: "added by the hop, p50 µs", get: p50},
	{name: "sent to the owner, p99 µs", file: "hop_local", get: p99},
	{name: "sent to another node, p99 µs", file: "hop_forwarded", get: p99},
	{name: "added by the hop, p99 µs", get: p99},
	{name: "sent to the owner, calls/s", file: "hop_local", get: func(r *report) float64 { return r.CallsPerSec }},
	{name: "sent to another node, calls/s", file: "hop_forwarded", get: func(r *report) float64 { return r.CallsPerSec }},
}

// clusterTables prints troupe's cluster figures, when bench/run measured
// them: the hop between nodes per round, and the idle sessions one and
// three nodes hold at the same cap. It returns the problems it met.
func clusterTables(w io.Writer, dir string, rounds []int) (problems []string) {
	seen := map[string]bool{}
	load1 := func(path string) *report {
		rep, err := load(path)
		if err == nil && rep.OK == 0 && rep.SessionsOpened == 0 {
			err = fmt.Errorf("nothing succeeded %v %s", rep.Errors, rep.Aborted)
		}
		if err != nil {
			if !seen[path] {
				problems = append(problems, fmt.Sprintf("cluster %s: %v", strings.TrimPrefix(path, dir+"/"), err))
			}
			seen[path] = true
			return nil
		}
		if !seen[path] && rep.SessionsOpened == 0 && (errCount(rep) > 0 || rep.Aborted != "") {
			problems = append(problems, fmt.Sprintf("cluster %s: %d failed calls %v %s",
				strings.TrimPrefix(path, dir+"/"), errCount(rep), rep.Errors, rep.Aborted))
		}
		seen[path] = true
		return rep
	}
	if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("r%d", rounds[0]), "cluster")); err == nil {
		fmt.Fprintf(w, "\ntroupe's cluster: a call sent to the node that owns its session, and to another node that forwards it (per round, and median of the rounds)\n\n")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprint(tw, "metric\t")
		for _, r := range rounds {
			fmt.Fprintf(tw, "r%d\t", r)
		}
		fmt.Fprintln(tw, "median\t")
		get := func(r int, file string, f func(*report) float64) float64 {
			rep := load1(filepath.Join(dir, fmt.Sprintf("r%d", r), "cluster", file+".json"))
			if rep == nil {
				return math.NaN()
			}
			return f(rep)
		}
		for _, row := range hopRows {
			fmt.Fprintf(tw, "%s\t", row.name)
			vals := make([]float64, len(rounds))
			for i, r := range rounds {
				if row.file != "" {
					vals[i] = get(r, row.file, row.get)
				} else {
					vals[i] = get(r, "hop_forwarded", row.get) - get(r, "hop_local", row.get)
				}
				fmt.Fprintf(tw, "%s\t", format(vals[i]))
			}
			fmt.Fprintf(tw, "%s\t\n", format(median(vals)))
		}
		tw.Flush()
	}
	capDir := filepath.Join(dir, "cluster")
	if _, err := os.Stat(capDir); err != nil {
		return problems
	}
	one, three := load1(filepath.Join(capDir, "cap_1node.json")), load1(filepath.Join(capDir, "cap_3nodes.json"))
	fmt.Fprintf(w, "\ntroupe's cluster: idle sessions held at the same cap a node (http.max_sessions), each run asked for more\n\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	held := func(r *report) float64 {
		if r == nil {
			return math.NaN()
		}
		return float64(r.SessionsOpened)
	}
	fmt.Fprintf(tw, "one node\t%s\t\n", format(held(one)))
	perNode := ""
	if three != nil && len(three.PerURL) > 0 {
		var parts []string
		for _, u := range three.PerURL {
			parts = append(parts, strconv.Itoa(u.Sessions))
		}
		perNode = " (" + strings.Join(parts, " + ") + ")"
	}
	fmt.Fprintf(tw, "three nodes\t%s%s\t\n", format(held(three)), perNode)
	fmt.Fprintf(tw, "three nodes ÷ one node\t%s\t\n", ratio(held(three)/held(one)))
	tw.Flush()
	return problems
}
