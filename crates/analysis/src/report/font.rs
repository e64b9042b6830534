//! The TrueType font charts are drawn with. plotters' ab_glyph backend renders text from a
//! font we hand it, so PNG text needs no system font lookup (headless machines, CI); the
//! font comes from Debian's fonts-dejavu-core.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use plotters::style::{register_font, FontStyle};

use super::ReportError;

/// Debian's fonts-dejavu-core.
pub const DEFAULT_FONT: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

/// The family name charts ask for.
pub const FAMILY: &str = "sans-serif";

/// The font registered last; registering reads and leaks the file, so do it once per path.
static REGISTERED: Mutex<Option<PathBuf>> = Mutex::new(None);

/// Loads `path` as the charts' font.
pub fn load(path: &Path) -> Result<(), ReportError> {
    let mut registered = REGISTERED.lock().unwrap_or_else(|p| p.into_inner());
    if registered.as_deref() == Some(path) {
        return Ok(());
    }
    let bytes = std::fs::read(path).map_err(|e| {
        ReportError::Font(format!(
            "cannot read the chart font {}: {e} (install Debian's fonts-dejavu-core, e.g. with scripts/install-deps.sh)",
            path.display()
        ))
    })?;
    // plotters keeps fonts for the life of the process.
    let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
    for style in [FontStyle::Normal, FontStyle::Bold] {
        register_font(FAMILY, style, bytes)
            .map_err(|_| ReportError::Font(format!("{} is not a TrueType font", path.display())))?;
    }
    *registered = Some(path.to_path_buf());
    Ok(())
}
