//! The `/ops` page: one self-contained HTML document (inline CSS, no script,
//! no external asset) that reloads itself. Every number carries a `data-k`
//! key, so tests and scrapers can read it without parsing the layout.

use std::{fmt::Write, time::Duration};

use hindsight_core::closed_set::VariantArray;
use hindsight_core::memory::Status;

use super::Snapshot;

const STATUSES: &[Status] = Status::VARIANTS;

const STYLE: &str = "
body{font:14px/1.4 system-ui,sans-serif;margin:0;background:#f6f7f9;color:#1d2330}
header{background:#1d2330;color:#fff;padding:10px 20px;display:flex;gap:20px;align-items:baseline}
header h1{font-size:18px;margin:0}header span{color:#b8c0d0;font-size:13px}
main{display:grid;grid-template-columns:repeat(auto-fit,minmax(520px,1fr));gap:16px;padding:16px 20px;max-width:1400px}
section{background:#fff;border:1px solid #dde1e8;border-radius:6px;padding:12px 16px}
h2{font-size:15px;margin:0 0 8px}h2+p,table+h2{margin-top:14px}
table{border-collapse:collapse;width:100%}
th,td{padding:4px 8px;border-bottom:1px solid #eef0f4;text-align:right;white-space:nowrap}
th{color:#5a6478;font-weight:600;font-size:12px}
th:first-child,td:first-child{text-align:left}
td.text{text-align:left;white-space:normal;word-break:break-word}
tr.total td{font-weight:600;border-top:2px solid #dde1e8}
.big{font-size:26px;font-weight:600}
.warn{color:#b3261e}.ok{color:#1e7b34}.muted{color:#8a93a5}
.problems{background:#fff4e5;border-color:#f0b45a}
";

fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// A number cell with its key.
fn num(key: &str, value: impl std::fmt::Display) -> String {
    format!("<td data-k=\"{}\">{value}</td>", esc(key))
}

/// The whole page.
pub fn render(snap: &Snapshot, refresh: Duration) -> String {
    let mut h = String::with_capacity(16 * 1024);
    let refresh = refresh.as_secs().max(1);
    let _ = write!(
        h,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"refresh\" content=\"{refresh}\">\
         <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
         <title>hindsight · ops</title><style>{STYLE}</style></head><body>\
         <header><h1>hindsight · ops</h1><span>namespace {}</span>\
         <span>taken {} UTC · refreshes every {refresh} s</span></header><main>",
        esc(&snap.namespace),
        snap.taken_at.format("%Y-%m-%d %H:%M:%S"),
    );
    if !snap.problems.is_empty() {
        h.push_str("<section class=\"problems\"><h2>Could not read</h2><ul>");
        for p in &snap.problems {
            let _ = write!(h, "<li>{}</li>", esc(p));
        }
        h.push_str("</ul></section>");
    }
    pipeline(&mut h, snap);
    dead_letters(&mut h, snap);
    memories(&mut h, snap);
    maintenance(&mut h, snap);
    h.push_str("</main></body></html>");
    h
}

fn pipeline(h: &mut String, snap: &Snapshot) {
    h.push_str(
        "<section id=\"pipeline\"><h2>Pipeline</h2><table><tr><th>stage</th><th>stream</th>\
         <th>handled</th><th>per second</th><th>lag</th><th>pending</th><th>ack pending</th>\
         <th>redelivered</th></tr>",
    );
    if snap.stages.is_empty() {
        h.push_str("<tr><td class=\"muted\" colspan=\"8\">no stage consumers (run `hindsight streams apply`)</td></tr>");
    }
    for s in &snap.stages {
        let k = |field: &str| format!("stage:{}:{field}", s.consumer);
        let rate = s
            .per_second
            .map_or_else(|| "–".to_string(), |r| format!("{r:.1}"));
        let lag_class = if s.lag() == 0 { "ok" } else { "warn" };
        let _ = write!(
            h,
            "<tr><td>{}</td><td class=\"text\">{}</td>{}{}<td data-k=\"{}\" class=\"{lag_class}\">{}</td>{}{}{}</tr>",
            esc(&s.consumer),
            esc(&s.stream),
            num(&k("acked"), s.acked),
            num(&k("per_second"), rate),
            esc(&k("lag")),
            s.lag(),
            num(&k("pending"), s.pending),
            num(&k("ack_pending"), s.ack_pending),
            num(&k("redelivered"), s.redelivered),
        );
    }
    h.push_str(
        "</table><p class=\"muted\">handled: deliveries acknowledged; lag: not yet delivered + delivered and not acked.</p></section>",
    );
}

fn dead_letters(h: &mut String, snap: &Snapshot) {
    let class = if snap.dlq_total == 0 { "ok" } else { "warn" };
    let _ = write!(
        h,
        "<section id=\"dlq\"><h2>Dead letters</h2><p><span class=\"big {class}\" data-k=\"dlq:total\">{}</span> waiting \
         <span class=\"muted\">(inspect and replay with <code>hindsight dlq</code>)</span></p>",
        snap.dlq_total
    );
    if !snap.dlq.is_empty() {
        h.push_str("<table><tr><th>stage</th><th>tenant</th><th>dead letters</th></tr>");
        for d in &snap.dlq {
            let _ = write!(
                h,
                "<tr><td>{}</td><td class=\"text\">{}</td>{}</tr>",
                esc(&d.stage),
                esc(&d.tenant),
                num(&format!("dlq:{}:{}", d.stage, d.tenant), d.count),
            );
        }
        h.push_str("</table>");
    }
    if !snap.dlq_latest.is_empty() {
        h.push_str(
            "<h2>Latest</h2><table><tr><th>seq</th><th>failed at</th><th>stage</th><th>tenant</th><th>reason</th></tr>",
        );
        for e in &snap.dlq_latest {
            let _ = write!(
                h,
                "<tr><td data-k=\"dlq-latest:seq\">{}</td><td>{}</td><td>{}</td><td class=\"text\">{}</td><td class=\"text\" data-k=\"dlq-latest:reason\">{}</td></tr>",
                e.seq,
                e.failed_at.format("%m-%d %H:%M:%S"),
                esc(&e.stage),
                esc(&e.tenant),
                esc(&e.reason),
            );
        }
        h.push_str("</table>");
    }
    h.push_str("</section>");
}

fn memories(h: &mut String, snap: &Snapshot) {
    h.push_str("<section id=\"memories\"><h2>Memories</h2><table><tr><th>tenant</th>");
    for status in STATUSES {
        let _ = write!(h, "<th>{status}</th>");
    }
    h.push_str("<th>total</th></tr>");
    let counts = snap.memories.as_deref().unwrap_or_default();
    let mut tenants: Vec<&str> = counts.iter().map(|m| m.tenant.as_str()).collect();
    tenants.dedup();
    for tenant in &tenants {
        let _ = write!(h, "<tr><td class=\"text\">{}</td>", esc(tenant));
        let mut total = 0;
        for status in STATUSES {
            let n: i64 = counts
                .iter()
                .filter(|m| m.tenant == *tenant && m.status == *status)
                .map(|m| m.count)
                .sum();
            total += n;
            h.push_str(&num(&format!("memories:{tenant}:{status}"), n));
        }
        h.push_str(&num(&format!("memories:{tenant}:total"), total));
        h.push_str("</tr>");
    }
    h.push_str("<tr class=\"total\"><td>all tenants</td>");
    let mut total = 0;
    for status in STATUSES {
        let n = snap.memories_in(*status);
        total += n;
        h.push_str(&num(&format!("memories:{status}"), n));
    }
    h.push_str(&num("memories:total", total));
    h.push_str("</tr></table></section>");
}

fn maintenance(h: &mut String, snap: &Snapshot) {
    h.push_str("<section id=\"maintenance\"><h2>Last maintenance run</h2>");
    let Some(run) = &snap.last_run else {
        h.push_str("<p class=\"muted\" data-k=\"run:status\">none yet</p></section>");
        return;
    };
    let class = match run.status.as_str() {
        "finished" => "ok",
        "running" => "muted",
        _ => "warn",
    };
    let finished = run.finished_at.map_or_else(
        || "not finished".to_string(),
        |f| f.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
    );
    let _ = write!(
        h,
        "<p><span class=\"big {class}\" data-k=\"run:status\">{}</span> · {} · started {} · finished {}{}</p>\
         <p class=\"muted\">run <span data-k=\"run:id\">{}</span></p><table><tr>",
        esc(&run.status),
        esc(&run.trigger),
        run.started_at.format("%Y-%m-%d %H:%M:%S UTC"),
        finished,
        if run.errors > 0 {
            format!(" · <span class=\"warn\">{} error(s)</span>", run.errors)
        } else {
            String::new()
        },
        esc(&run.id),
    );
    for (step, _) in &run.counts {
        let _ = write!(h, "<th>{}</th>", esc(step));
    }
    h.push_str("</tr><tr>");
    for (step, n) in &run.counts {
        h.push_str(&num(&format!("run:{step}"), n));
    }
    h.push_str("</tr></table></section>");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_from_the_system_is_escaped() {
        assert_eq!(
            esc("<script>\"x\" & 'y'\n"),
            "&lt;script&gt;&quot;x&quot; &amp; &#39;y&#39; "
        );
    }
}
