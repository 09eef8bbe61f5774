//! The budget-check figure: check cost against history size, drawn without fonts.
//!
//! Criterion's medians are read from `<target>/criterion/<group>/<function>/<size>/new/estimates.json`
//! and drawn on log–log axes with decade grid lines; the picture has no text, so it needs no
//! system fonts, and `docs/BENCHMARKS.md` says which colour is which series.

use std::path::Path;

use plotters::prelude::*;

/// One series of the figure.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Criterion's function name inside the group.
    pub name: String,
    /// (history size, median nanoseconds), ascending in size.
    pub points: Vec<(u64, f64)>,
}

/// Why the figure could not be made.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// A criterion estimate could not be read.
    #[error("cannot read {path}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A criterion estimate is not the JSON criterion writes.
    #[error("cannot parse {path}")]
    Parse {
        /// The file.
        path: String,
        /// The parse error.
        #[source]
        source: serde_json::Error,
    },
    /// An estimate file has no median.
    #[error("{path} has no median point estimate")]
    NoMedian {
        /// The file.
        path: String,
    },
    /// No point to draw.
    #[error("no benchmark results to plot: run `cargo bench -p pith-bench --bench budget` first")]
    Empty,
    /// Drawing failed.
    #[error("cannot draw the figure: {0}")]
    Draw(String),
    /// Encoding or writing the PNG failed.
    #[error("cannot write the PNG")]
    Png(#[from] png::EncodingError),
    /// Creating the PNG file failed.
    #[error("cannot create the PNG file")]
    Create(#[source] std::io::Error),
}

/// The median (ns) criterion recorded for one benchmark, or `None` when it was not run.
///
/// # Errors
/// When the estimate file exists but cannot be read or parsed.
pub fn median_ns(
    criterion_dir: &Path,
    group: &str,
    function: &str,
    size: u64,
) -> Result<Option<f64>, PlotError> {
    let path = criterion_dir
        .join(group)
        .join(function)
        .join(size.to_string())
        .join("new/estimates.json");
    if !path.is_file() {
        return Ok(None);
    }
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(&path).map_err(|source| PlotError::Read {
        path: shown.clone(),
        source,
    })?;
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|source| PlotError::Parse {
        path: shown.clone(),
        source,
    })?;
    value
        .pointer("/median/point_estimate")
        .and_then(serde_json::Value::as_f64)
        .map(Some)
        .ok_or(PlotError::NoMedian { path: shown })
}

/// The colours of the series, in order (named in BENCHMARKS.md).
pub const COLOURS: [RGBColor; 5] = [
    RGBColor(220, 40, 40),
    RGBColor(30, 100, 220),
    RGBColor(30, 160, 60),
    RGBColor(230, 150, 0),
    RGBColor(140, 60, 180),
];

fn draw_err<E: std::fmt::Debug>(e: E) -> PlotError {
    PlotError::Draw(format!("{e:?}"))
}

/// Draws `series` (log–log, decade grid) to a `width`×`height` PNG at `out`.
///
/// # Errors
/// [`PlotError::Empty`] without points; drawing and file errors otherwise.
pub fn draw(series: &[Series], out: &Path, width: u32, height: u32) -> Result<(), PlotError> {
    let all: Vec<(u64, f64)> = series.iter().flat_map(|s| s.points.iter().copied()).collect();
    if all.is_empty() {
        return Err(PlotError::Empty);
    }
    let decade_floor = |v: f64| 10f64.powf(v.log10().floor());
    let decade_ceil = |v: f64| 10f64.powf(v.log10().ceil());
    let x_min = decade_floor(all.iter().map(|p| p.0 as f64).fold(f64::MAX, f64::min));
    let x_max = decade_ceil(all.iter().map(|p| p.0 as f64).fold(0.0, f64::max));
    let y_min = decade_floor(all.iter().map(|p| p.1).fold(f64::MAX, f64::min).max(1.0));
    let y_max = decade_ceil(all.iter().map(|p| p.1).fold(0.0, f64::max).max(10.0));
    let mut buffer = vec![255u8; (width * height * 3) as usize];
    {
        let root = BitMapBackend::with_buffer(&mut buffer, (width, height)).into_drawing_area();
        root.fill(&WHITE).map_err(draw_err)?;
        let area = root.margin(20, 20, 20, 20);
        let mut chart = ChartBuilder::on(&area)
            .build_cartesian_2d((x_min..x_max).log_scale(), (y_min..y_max).log_scale())
            .map_err(draw_err)?;
        let grey = RGBColor(200, 200, 200);
        let mut x = x_min;
        while x <= x_max * 1.001 {
            chart
                .draw_series(LineSeries::new([(x, y_min), (x, y_max)], grey.stroke_width(1)))
                .map_err(draw_err)?;
            x *= 10.0;
        }
        let mut y = y_min;
        while y <= y_max * 1.001 {
            chart
                .draw_series(LineSeries::new([(x_min, y), (x_max, y)], grey.stroke_width(1)))
                .map_err(draw_err)?;
            y *= 10.0;
        }
        for (s, colour) in series.iter().zip(COLOURS.iter().cycle()) {
            let points: Vec<(f64, f64)> = s.points.iter().map(|&(n, ns)| (n as f64, ns)).collect();
            chart
                .draw_series(LineSeries::new(points.clone(), colour.stroke_width(3)))
                .map_err(draw_err)?;
            chart
                .draw_series(points.into_iter().map(|p| Circle::new(p, 6, colour.filled())))
                .map_err(draw_err)?;
        }
        root.present().map_err(draw_err)?;
    }
    let file = std::fs::File::create(out).map_err(PlotError::Create)?;
    let mut encoder = png::Encoder::new(std::io::BufWriter::new(file), width, height);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header()?;
    writer.write_image_data(&buffer)?;
    writer.finish()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_a_png_and_reads_criterion_medians() {
        let dir = tempfile::tempdir().unwrap();
        let est = dir.path().join("g/f/100/new");
        std::fs::create_dir_all(&est).unwrap();
        std::fs::write(
            est.join("estimates.json"),
            r#"{"median":{"point_estimate":812.5}}"#,
        )
        .unwrap();
        assert_eq!(median_ns(dir.path(), "g", "f", 100).unwrap(), Some(812.5));
        assert_eq!(median_ns(dir.path(), "g", "f", 1000).unwrap(), None);
        let out = dir.path().join("plot.png");
        let series = vec![Series {
            name: "f".into(),
            points: vec![(100, 800.0), (1_000, 900.0), (100_000, 50_000.0)],
        }];
        draw(&series, &out, 320, 240).unwrap();
        let bytes = std::fs::read(&out).unwrap();
        assert_eq!(&bytes[1..4], b"PNG");
        assert!(matches!(draw(&[], &out, 10, 10), Err(PlotError::Empty)));
    }
}
