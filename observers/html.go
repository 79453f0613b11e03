package observers

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"html/template"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"

	"github.com/zkrecipes/zkrecipes/events"
)

// stateColors are the contention engine's states' colours; other
// machines' states get one of palette by their name's hash.
var stateColors = map[events.State]string{
	events.StateStart:     "#c9ccd1",
	events.StateOffer:     "#9ec5e8",
	events.StateDetermine: "#b7a6e0",
	events.StateReady:     "#f6d27a",
	events.StateLeader:    "#5cb85c",
	events.StateFailed:    "#e06666",
	events.StateStop:      "#e3e3e3",
}

var palette = []string{"#8dd3c7", "#fdb462", "#b3de69", "#fccde5", "#80b1d3", "#bebada", "#ffed6f", "#ccebc5", "#bc80bd", "#d9d9d9"}

func stateColor(s events.State) string {
	if c, ok := stateColors[s]; ok {
		return c
	}
	h := fnv.New32a()
	h.Write([]byte(s))
	return palette[h.Sum32()%uint32(len(palette))]
}

// Sizes of a lane, in pixels.
const (
	stateRowH = 18
	spanRowH  = 14
)

type htmlPage struct {
	Start, Length, Counts string
	Legend                []htmlLegend
	Ticks                 []htmlItem
	Notes                 []htmlItem
	Groups                []htmlGroup
	CSS                   template.CSS
}

type htmlLegend struct {
	Class, Label string
}

type htmlGroup struct {
	Name  string
	Lanes []htmlLane
}

type htmlLane struct {
	Name   string
	Height int
	Items  []htmlItem
}

type htmlItem struct {
	Class, Label, Title string
	Style, LabelStyle   template.CSS
}

func (tl *timeline) writeHTML(w io.Writer) error {
	length := tl.end.Sub(tl.start)
	scale := float64(length)
	if scale <= 0 {
		scale = 1
	}
	pct := func(t time.Time) float64 { return float64(t.Sub(tl.start)) / scale * 100 }
	at := func(t time.Time) string { return fmtDur(t.Sub(tl.start)) }
	page := htmlPage{
		Start:  tl.start.UTC().Format("2006-01-02 15:04:05.000000 UTC"),
		Length: fmtDur(length),
		Counts: fmt.Sprintf("%d events, %d spans", tl.nrecs, tl.nspans),
	}
	if tl.dropped > 0 {
		page.Counts += fmt.Sprintf(", %d not kept (see observers.WithKeep)", tl.dropped)
	}
	var css strings.Builder
	classes := map[events.State]string{}
	stateClass := func(s events.State) string {
		if c, ok := classes[s]; ok {
			return c
		}
		c := fmt.Sprintf("s%d", len(classes))
		classes[s] = c
		fmt.Fprintf(&css, ".%s{background:%s}\n", c, stateColor(s))
		page.Legend = append(page.Legend, htmlLegend{"st " + c, string(s)})
		return c
	}
	for _, s := range events.States { // the engine's in lifecycle order first
		for _, g := range tl.groups {
			for _, l := range g.lanes {
				for _, b := range l.states {
					if b.state == s {
						stateClass(s)
					}
				}
			}
		}
	}
	page.Legend = append(page.Legend,
		htmlLegend{"sp", "span"}, htmlLegend{"sp client", "ZooKeeper request"}, htmlLegend{"sp err", "span with an error"},
		htmlLegend{"mark fault", "fault"}, htmlLegend{"mark ok", "reconnected"}, htmlLegend{"mark note", "note"})

	box := func(from, to time.Time) template.CSS {
		l, r := pct(from), pct(to)
		return template.CSS(fmt.Sprintf("left:%.4f%%;width:%.4f%%", l, math.Max(r-l, 0)))
	}
	for _, tk := range ticks(length) {
		page.Ticks = append(page.Ticks, htmlItem{Class: "tick", Label: fmtDur(tk),
			Style: template.CSS(fmt.Sprintf("left:%.4f%%", float64(tk)/scale*100))})
	}
	for _, n := range tl.notes {
		page.Notes = append(page.Notes, htmlItem{Class: "mark note", Label: n.Text, Title: n.Text + " at " + at(n.Time),
			Style: template.CSS(fmt.Sprintf("left:%.4f%%", pct(n.Time)))})
	}
	for _, g := range tl.groups {
		hg := htmlGroup{Name: g.name}
		for _, l := range g.lanes {
			rows := 0
			for _, d := range l.depth {
				rows += d
			}
			hl := htmlLane{Name: l.name, Height: stateRowH + 4 + rows*spanRowH}
			for _, b := range l.states {
				hl.Items = append(hl.Items, htmlItem{Class: "st " + stateClass(b.state), Label: string(b.state),
					Title: fmt.Sprintf("%s: %s\n%s → %s (%s)", l.name, b.state, at(b.from), at(b.to), fmtDur(b.to.Sub(b.from))),
					Style: box(b.from, b.to)})
			}
			for _, r := range l.recs {
				cls, label := "ev", ""
				switch {
				case isFault(r.Type):
					cls, label = "mark fault", r.Type.String()
				case r.Type == events.Reconnected:
					cls, label = "mark ok", r.Type.String()
				}
				hl.Items = append(hl.Items, htmlItem{Class: cls, Label: label, Title: recordTitle(r, at(r.Time)),
					Style: template.CSS(fmt.Sprintf("left:%.4f%%", pct(r.Time)))})
			}
			for _, n := range l.notes {
				hl.Items = append(hl.Items, htmlItem{Class: "mark note", Label: n.Text, Title: n.Text + " at " + at(n.Time),
					Style: template.CSS(fmt.Sprintf("left:%.4f%%", pct(n.Time)))})
			}
			stackLabels(hl.Items)
			row := 0
			for t, track := range l.tracks {
				for _, s := range track {
					cls := "sp"
					if s.Kind.String() == "client" {
						cls += " client"
					}
					if s.Status == codes.Error {
						cls += " err"
					}
					top := stateRowH + 4 + (row+s.depth)*spanRowH
					hl.Items = append(hl.Items, htmlItem{Class: cls, Label: s.Name, Title: spanTitle(s.Span, at),
						Style: box(s.Start, s.End) + template.CSS(fmt.Sprintf(";top:%dpx", top))})
					for _, e := range s.Events {
						hl.Items = append(hl.Items, htmlItem{Class: "sev", Title: e.Name + " at " + at(e.Time) + attrLines(e.Attrs),
							Style: template.CSS(fmt.Sprintf("left:%.4f%%;top:%dpx", pct(e.Time), top))})
					}
				}
				row += l.depth[t]
			}
			hg.Lanes = append(hg.Lanes, hl)
		}
		page.Groups = append(page.Groups, hg)
	}
	stackLabels(page.Notes)
	page.CSS = template.CSS(css.String())
	if err := htmlTemplate.Execute(w, page); err != nil {
		return fmt.Errorf("observers: html timeline: %w", err)
	}
	return nil
}

// stackLabels moves down the label of a mark that would overlap the one
// before it (a SUSPENDED and a LOST at once, say).
func stackLabels(items []htmlItem) {
	var marks []*htmlItem
	for i := range items {
		if strings.HasPrefix(items[i].Class, "mark") {
			marks = append(marks, &items[i])
		}
	}
	left := func(it *htmlItem) float64 {
		var v float64
		fmt.Sscanf(string(it.Style), "left:%f%%", &v)
		return v
	}
	slices.SortStableFunc(marks, func(a, b *htmlItem) int { return cmp.Compare(left(a), left(b)) })
	var prev []float64 // per level: where the last label there ends, roughly
	for _, m := range marks {
		x, level := left(m), 0
		for level < len(prev) && x < prev[level] {
			level++
		}
		if level == len(prev) {
			prev = append(prev, 0)
		}
		prev[level] = x + 0.6*float64(len(m.Label)) // a character is about 0.6% of a 1200px track
		if level > 0 {
			m.LabelStyle = template.CSS(fmt.Sprintf("margin-top:%dpx", level*11))
		}
	}
}

func recordTitle(r Record, at string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s at %s\nstate: %s", r.Instance, r.Type, at, r.State)
	if r.Term != 0 {
		fmt.Fprintf(&b, "\nterm: %d", r.Term)
	}
	if r.Node != "" {
		fmt.Fprintf(&b, "\nnode: %s", r.Node)
	}
	if r.Token != 0 {
		fmt.Fprintf(&b, "\ntoken: %s", hex(r.Token))
	}
	if r.Session != 0 {
		fmt.Fprintf(&b, "\nsession: %s", hex(r.Session))
	}
	if r.Err != "" {
		fmt.Fprintf(&b, "\nerror: %s", r.Err)
	}
	if r.Missed != 0 {
		fmt.Fprintf(&b, "\nmissed: %d", r.Missed)
	}
	if r.TraceID.IsValid() {
		fmt.Fprintf(&b, "\ntrace: %s span: %s", r.TraceID, r.SpanID)
	}
	return b.String()
}

func spanTitle(s *Span, at func(time.Time) string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s)\n%s, %s", s.Name, s.Kind, at(s.Start), fmtDur(s.End.Sub(s.Start)))
	if s.Status == codes.Error {
		fmt.Fprintf(&b, "\nstatus: error %s", s.StatusMsg)
	}
	b.WriteString(attrLines(s.Attrs))
	for _, e := range s.Events {
		fmt.Fprintf(&b, "\nevent %s at %s", e.Name, at(e.Time))
	}
	for _, l := range s.Links {
		fmt.Fprintf(&b, "\nlink: trace %s span %s", l.TraceID(), l.SpanID())
	}
	fmt.Fprintf(&b, "\ntrace: %s span: %s", s.TraceID, s.SpanID)
	return b.String()
}

func attrLines(kvs []attribute.KeyValue) string {
	var b strings.Builder
	for _, kv := range kvs {
		fmt.Fprintf(&b, "\n%s = %s", kv.Key, kv.Value.String())
	}
	return b.String()
}

// ticks are about ten round times from 0 to length.
func ticks(length time.Duration) []time.Duration {
	if length <= 0 {
		return []time.Duration{0}
	}
	step := time.Duration(1)
	for mult := 0; step*10 < length; mult = (mult + 1) % 3 {
		step = step * []time.Duration{2, 5, 2}[mult] / []time.Duration{1, 2, 1}[mult] // 1, 2, 5, 10, 20, 50, ...
	}
	var out []time.Duration
	for t := time.Duration(0); t <= length; t += step {
		out = append(out, t)
	}
	return out
}

// fmtDur writes d in µs, ms or s, with three significant decimals.
func fmtDur(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%.3g µs", float64(d)/1e3)
	case d < time.Second:
		return fmt.Sprintf("%.4g ms", float64(d)/1e6)
	}
	return fmt.Sprintf("%.4g s", d.Seconds())
}

var htmlTemplate = template.Must(template.New("timeline").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>zkrecipes timeline</title>
<script>
window.__tlErrors = [];
window.addEventListener("error", function (e) { window.__tlErrors.push(String(e.message || e)); });
(function () { var ce = console.error; console.error = function () { window.__tlErrors.push(Array.prototype.join.call(arguments, " ")); return ce.apply(console, arguments); }; })();
</script>
<style>
body{font:13px/1.3 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#222}
header{padding:8px 12px;border-bottom:1px solid #ddd;background:#fafafa;position:sticky;top:0;z-index:10}
h1{font-size:16px;margin:0 0 4px}
.meta{color:#555}
.legend{margin-top:6px;display:flex;flex-wrap:wrap;gap:4px 12px;align-items:center}
.legend .key{display:inline-flex;align-items:center;gap:4px}
.legend .sw{position:relative;display:inline-block;width:18px;height:12px;border-radius:2px}
.legend .mark{position:relative;width:3px;height:12px;left:auto}
#tl{overflow-x:auto;position:relative;--tw:calc(100vw - 220px)}
.wrap{position:relative;width:calc(190px + var(--tw))}
.group h2{font-size:13px;margin:0;padding:6px 12px 2px;background:#f0f3f7;border-top:1px solid #d8dde5;position:sticky;left:0}
.lane{display:flex;border-bottom:1px solid #eee}
.label{flex:0 0 178px;padding:2px 6px 0;position:sticky;left:0;background:#fff;z-index:3;overflow:hidden;text-overflow:ellipsis;white-space:nowrap;border-right:1px solid #ddd}
.track{position:relative;width:var(--tw);flex:0 0 auto}
.axis .track{height:18px}
.tick{position:absolute;top:0;height:100%;border-left:1px solid #ccc;padding-left:3px;font-size:11px;color:#666;white-space:nowrap}
.st{position:absolute;top:2px;height:16px;min-width:1px;border-radius:2px;overflow:hidden;white-space:nowrap;font-size:10px;line-height:16px;text-indent:2px;color:#222;box-shadow:inset -1px 0 0 rgba(255,255,255,.7)}
.ev{position:absolute;top:12px;width:1px;height:8px;background:#333;opacity:.55}
.sp{position:absolute;height:12px;min-width:1px;background:#7aa6d8;border:1px solid #4b7fb8;box-sizing:border-box;border-radius:2px;overflow:hidden;white-space:nowrap;font-size:9px;line-height:10px;color:#06213f;text-indent:1px}
.sp.client{background:#c8dbf0;border-color:#7aa6d8}
.sp.err{background:#f3b3b3;border-color:#c0392b;color:#5a0f0f}
.sev{position:absolute;width:3px;height:12px;margin-left:-1px;background:#333}
.mark{position:absolute;top:0;bottom:0;width:2px;margin-left:-1px;z-index:2}
.mark span{position:absolute;top:0;left:3px;font-size:10px;font-weight:600;white-space:nowrap;background:rgba(255,255,255,.85);padding:0 2px}
.mark.fault{background:#d62728}.mark.fault span{color:#b0161c}
.mark.ok{background:#2ca02c}.mark.ok span{color:#1d6e1d}
.mark.note{background:#8e44ad}.mark.note span{color:#6c2e86}
.notes{position:absolute;top:0;bottom:0;left:190px;width:var(--tw);pointer-events:none;z-index:4}
.notes .mark span{top:20px}
#detail{position:fixed;bottom:0;left:0;right:0;background:#fffbe6;border-top:1px solid #e6d98c;padding:4px 12px;white-space:pre-wrap;font:12px ui-monospace,monospace;min-height:1.3em;max-height:30vh;overflow:auto;z-index:20}
#status{color:#888;margin-left:12px}
{{.CSS}}</style></head>
<body>
<header><h1>zkrecipes timeline</h1>
<div class="meta">from {{.Start}}, {{.Length}}; {{.Counts}}; hover over a bar for its details.
<label>zoom <input id="zoom" type="range" min="1" max="64" step="1" value="1"></label><span id="status"></span></div>
<div class="legend">{{range .Legend}}<span class="key"><span class="sw {{.Class}}"></span>{{.Label}}</span>{{end}}</div>
</header>
<div id="tl"><div class="wrap">
<div class="lane axis"><div class="label">time</div><div class="track">{{range .Ticks}}<div class="{{.Class}}" style="{{.Style}}">{{.Label}}</div>{{end}}</div></div>
{{range .Groups}}<section class="group"><h2>{{.Name}}</h2>
{{range .Lanes}}<div class="lane" data-lane="{{.Name}}"><div class="label" title="{{.Name}}">{{.Name}}</div><div class="track" style="height:{{.Height}}px">
{{range .Items}}<div class="{{.Class}}" style="{{.Style}}" title="{{.Title}}">{{if .Label}}<span{{with .LabelStyle}} style="{{.}}"{{end}}>{{.Label}}</span>{{end}}</div>
{{end}}</div></div>
{{end}}</section>
{{end}}<div class="notes">{{range .Notes}}<div class="{{.Class}}" style="{{.Style}}" title="{{.Title}}"><span{{with .LabelStyle}} style="{{.}}"{{end}}>{{.Label}}</span></div>{{end}}</div>
</div></div>
<div id="detail"></div>
<script>
(function () {
  var tl = document.getElementById("tl"), zoom = document.getElementById("zoom"), detail = document.getElementById("detail");
  zoom.addEventListener("input", function () {
    var frac = (tl.scrollLeft + tl.clientWidth / 2) / tl.scrollWidth;
    tl.style.setProperty("--tw", Math.max(tl.clientWidth - 200, 200) * zoom.value + "px");
    tl.scrollLeft = frac * tl.scrollWidth - tl.clientWidth / 2;
  });
  document.addEventListener("mouseover", function (e) {
    var t = e.target.closest ? e.target.closest("[title]") : null;
    if (t) { detail.textContent = t.getAttribute("title"); }
  });
  var lanes = document.querySelectorAll(".lane[data-lane]").length;
  var status = document.getElementById("status");
  function report() {
    var errs = window.__tlErrors;
    status.textContent = errs.length ? "errors: " + errs.join("; ") : lanes + " lanes";
    document.documentElement.setAttribute("data-lanes", String(lanes));
    document.documentElement.setAttribute("data-errors", String(errs.length));
    document.documentElement.setAttribute("data-rendered", "yes");
  }
  report();
  window.addEventListener("load", report);
})();
</script>
</body></html>
`))
