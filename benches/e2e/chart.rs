//! `e2e.png`: backlog drain events/s (left) and steady-state p99 append latency (right),
//! grouped bars per peer, drawn with plotters. Text uses DejaVu Sans from Debian's
//! `fonts-dejavu-core` (read at run time; plotters' `ab_glyph` backend has no font of its own).

use std::path::Path;

use anyhow::{bail, Context, Result};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::report::Results;

const FONT_PATHS: [&str; 2] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
];

const PEERS: [(&str, RGBColor); 4] = [
    ("outboxd", RGBColor(31, 119, 180)),
    ("outboxd-alo", RGBColor(174, 199, 232)),
    ("debezium", RGBColor(214, 39, 40)),
    ("ceiling", RGBColor(127, 127, 127)),
];

fn register_font() -> Result<()> {
    static DONE: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    if DONE.get().is_some() {
        return Ok(());
    }
    let Some(path) = FONT_PATHS.iter().find(|p| Path::new(p).exists()) else {
        bail!("no DejaVuSans.ttf; install Debian's fonts-dejavu-core");
    };
    let bytes: &'static [u8] = Box::leak(std::fs::read(path)?.into_boxed_slice());
    plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
        .map_err(|_| anyhow::anyhow!("{path} is not a usable font"))?;
    let _ = DONE.set(());
    Ok(())
}

/// Bars: `values[group][peer]` (None = no bar).
struct Grouped {
    title: String,
    y_label: String,
    groups: Vec<String>,
    values: Vec<Vec<Option<f64>>>,
    /// Where the legend goes (away from the tallest bars).
    legend: SeriesLabelPosition,
}

fn draw_grouped(
    area: &DrawingArea<BitMapBackend, plotters::coord::Shift>,
    g: &Grouped,
) -> Result<()> {
    let ymax = g
        .values
        .iter()
        .flatten()
        .flatten()
        .fold(0.0f64, |a, &b| a.max(b))
        .max(1.0)
        * 1.15;
    let n = g.groups.len().max(1) as f64;
    let mut chart = ChartBuilder::on(area)
        .caption(&g.title, ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(55)
        .y_label_area_size(75)
        .build_cartesian_2d(0f64..n, 0f64..ymax)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_desc(g.y_label.as_str())
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()?;
    let width = 0.8 / PEERS.len() as f64;
    for (p, (peer, color)) in PEERS.iter().enumerate() {
        let bars: Vec<(f64, f64)> = g
            .values
            .iter()
            .enumerate()
            .filter_map(|(i, row)| row[p].map(|v| (i as f64 + 0.1 + p as f64 * width, v)))
            .collect();
        if bars.is_empty() {
            continue;
        }
        chart
            .draw_series(
                bars.iter().map(|&(x, v)| {
                    Rectangle::new([(x, 0.0), (x + width * 0.9, v)], color.filled())
                }),
            )?
            .label(*peer)
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 12, y + 6)], color.filled()));
        let label = ("sans-serif", 11)
            .into_font()
            .color(&BLACK)
            .pos(Pos::new(HPos::Center, VPos::Bottom));
        chart.draw_series(
            bars.iter()
                .map(|&(x, v)| Text::new(short(v), (x + width * 0.45, v), label.clone())),
        )?;
    }
    chart
        .configure_series_labels()
        .position(g.legend.clone())
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .draw()?;
    let style = ("sans-serif", 13)
        .into_font()
        .color(&BLACK)
        .pos(Pos::new(HPos::Center, VPos::Top));
    // backend_coord is in the whole image's pixels; the area draws relative to its corner.
    let (base_x, base_y) = area.get_base_pixel();
    for (i, name) in g.groups.iter().enumerate() {
        let (px, py) = chart.backend_coord(&(i as f64 + 0.5, 0.0));
        let (px, py) = (px - base_x, py - base_y);
        for (line, text) in name.split('\n').enumerate() {
            area.draw(&Text::new(
                text.to_string(),
                (px, py + 8 + 16 * line as i32),
                style.clone(),
            ))?;
        }
    }
    Ok(())
}

fn short(v: f64) -> String {
    if v >= 10_000.0 {
        format!("{:.0}k", v / 1000.0)
    } else if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// Groups `items` by `key` (in first-seen order), one bar per peer in each group.
fn group<T, K: PartialEq>(
    items: &[T],
    key: impl Fn(&T) -> K,
    peer: impl Fn(&T) -> &str,
    value: impl Fn(&T) -> f64,
) -> (Vec<K>, Vec<Vec<Option<f64>>>) {
    let mut keys: Vec<K> = Vec::new();
    for item in items {
        let k = key(item);
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    let values = keys
        .iter()
        .map(|k| {
            PEERS
                .iter()
                .map(|(p, _)| {
                    items
                        .iter()
                        .find(|it| key(it) == *k && peer(it) == *p)
                        .map(&value)
                })
                .collect()
        })
        .collect();
    (keys, values)
}

/// Draws the chart of `r` into `path` (PNG, 1500×600).
pub fn draw(r: &Results, path: &Path) -> Result<()> {
    register_font()?;
    let (keys, values) = group(
        &r.drains,
        |d| {
            let source = if d.peer == "ceiling" {
                "ceiling"
            } else {
                d.source.as_str()
            };
            (source.to_string(), d.payload)
        },
        |d| d.peer.as_str(),
        |d| d.events_per_s,
    );
    let drain = Grouped {
        title: "Backlog drain (events/s, higher is better)".into(),
        y_label: "events/s".into(),
        groups: keys.iter().map(|(s, p)| format!("{s}\n{p} B")).collect(),
        values,
        legend: SeriesLabelPosition::UpperRight,
    };
    let (keys, values) = group(
        &r.steadies,
        |s| (s.source.clone(), s.target_rate),
        |s| s.peer.as_str(),
        |s| s.append_p99_ms.max(0.0),
    );
    let latency = Grouped {
        title: "Steady state: p99 commit → Kafka append (ms, lower is better)".into(),
        y_label: "ms".into(),
        groups: keys.iter().map(|(s, r)| format!("{s}\n{r}/s")).collect(),
        values,
        legend: SeriesLabelPosition::UpperLeft,
    };
    let root = BitMapBackend::new(path, (1500, 600)).into_drawing_area();
    root.fill(&WHITE)?;
    let (left, right) = root.split_horizontally(750);
    draw_grouped(&left, &drain).context("drain panel")?;
    draw_grouped(&right, &latency).context("latency panel")?;
    root.present()?;
    Ok(())
}
