// Command summarize reads the JSON reports bench/run collected, laid out as
// DIR/r<round>/<peer>/<measurement>.json, and prints the median of each
// figure per peer and troupe's ratio to every other peer, per round and as
// the median of the rounds.
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
	peers := strings.Split(*peersFlag, ",")

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

	// val[metric][peer][round index] = value (NaN when missing).
	val := make([][][]float64, len(metrics))
	var problems []string
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

	problems = append(problems, processTable(w, dir, rounds)...)

	if len(problems) > 0 {
		fmt.Fprintln(w, "\nProblems:")
		for _, p := range problems {
			fmt.Fprintln(w, "  "+p)
		}
	}
	return 0
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
	case v >= 100:
		return group(int64(math.Round(v)))
	case v >= 10:
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
