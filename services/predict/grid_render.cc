#include "services/predict/grid_render.h"

#include <cairo.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "services/predict/cairo_surface.h"

namespace dtrain::predict {
namespace {

constexpr char kFont[] = "DejaVu Sans";  // fonts-dejavu-core
constexpr double kFontSize = 11;
constexpr double kLine = 14;     // caption line height
constexpr int kPad = 6;          // around each cell's picture
constexpr int kTitle = 28;       // band for the title
constexpr int kMinCell = 112;    // wide enough for "T-shirt/top 100%"
constexpr int kMaxSide = 32767;  // cairo's image surface limit

// Shortens `text` with "..." until it fits in `width` points.
std::string Fit(cairo_t* cr, std::string text, double width) {
  cairo_text_extents_t ext;
  cairo_text_extents(cr, text.c_str(), &ext);
  if (ext.x_advance <= width) return text;
  while (!text.empty()) {
    text.pop_back();
    const std::string candidate = text + "...";
    cairo_text_extents(cr, candidate.c_str(), &ext);
    if (ext.x_advance <= width) return candidate;
  }
  return text;
}

void Caption(cairo_t* cr, const std::string& text, double x, double y, double width) {
  cairo_move_to(cr, x, y);
  cairo_show_text(cr, Fit(cr, text, width).c_str());
}

// Where everything goes: cells sized for the largest image and two caption lines.
struct GridGeometry {
  int scale = 1;
  int columns = 1;
  int max_h = 1;  // the tallest image, unscaled: every cell's captions line up
  int cell_w = 0;
  int cell_h = 0;
  int64_t width = 0;
  int64_t height = 0;
};

// Sizes the grid; INVALID_ARGUMENT when there is nothing to draw or the picture
// would exceed cairo's limit.
absl::StatusOr<GridGeometry> PlanGrid(const std::vector<GridCell>& cells, const GridLayout& layout) {
  if (cells.empty()) return absl::InvalidArgumentError("nothing to render: no images");
  GridGeometry g;
  int max_w = 1;
  for (const GridCell& c : cells) {
    max_w = std::max(max_w, c.image.width);
    g.max_h = std::max(g.max_h, c.image.height);
  }
  g.scale = std::max(1, layout.scale);
  g.columns = std::clamp(layout.columns, 1, static_cast<int>(cells.size()));
  const int rows = static_cast<int>((cells.size() + g.columns - 1) / g.columns);
  g.cell_w = std::max(kMinCell, max_w * g.scale + 2 * kPad);
  g.cell_h = g.max_h * g.scale + 2 * kPad + static_cast<int>(2 * kLine) + 4;
  g.width = static_cast<int64_t>(g.columns) * g.cell_w;
  g.height = kTitle + static_cast<int64_t>(rows) * g.cell_h;
  if (g.width > kMaxSide || g.height > kMaxSide) {
    return absl::InvalidArgumentError(absl::StrCat("a grid of ", cells.size(), " images would be ", g.width, "x",
                                                   g.height, " pixels, over cairo's limit of ", kMaxSide,
                                                   "; render fewer images"));
  }
  return g;
}

// A white page with the title in bold; leaves the caption font selected.
void DrawTitle(cairo_t* c, const std::string& title, int64_t width) {
  cairo_set_source_rgb(c, 1, 1, 1);
  cairo_paint(c);
  cairo_select_font_face(c, kFont, CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_BOLD);
  cairo_set_font_size(c, kFontSize + 2);
  cairo_set_source_rgb(c, 0, 0, 0);
  Caption(c, title, kPad, kTitle - 9, static_cast<double>(width) - 2 * kPad);
  cairo_select_font_face(c, kFont, CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(c, kFontSize);
}

// Cell `i`: the image scaled up, a frame coloured by the verdict, and the captions.
void DrawCell(cairo_t* c, const GridCell& cell, size_t i, const GridGeometry& g) {
  const int scale = g.scale;
  const double x0 = static_cast<double>(i % g.columns) * g.cell_w;
  const double y0 = kTitle + static_cast<double>(i / g.columns) * g.cell_h;
  const double img_x = x0 + (g.cell_w - cell.image.width * scale) / 2.0;
  const double img_y = y0 + kPad;
  if (cell.image.width > 0 && cell.image.height > 0) {
    Surface img = ImageSurface(cell.image);
    cairo_save(c);
    cairo_translate(c, img_x, img_y);
    cairo_scale(c, scale, scale);
    cairo_set_source_surface(c, img.get(), 0, 0);
    // Crisp pixels: a 28x28 image blurred by smoothing is harder to judge.
    cairo_pattern_set_filter(cairo_get_source(c), CAIRO_FILTER_NEAREST);
    cairo_paint(c);
    cairo_restore(c);
  }
  // Frame: red and thick for a wrong answer, green for a right one, gray when unknown.
  if (cell.wrong) {
    cairo_set_source_rgb(c, 0.85, 0.1, 0.1);
    cairo_set_line_width(c, 4);
  } else if (!cell.truth.empty()) {
    cairo_set_source_rgb(c, 0.2, 0.6, 0.2);
    cairo_set_line_width(c, 1.5);
  } else {
    cairo_set_source_rgb(c, 0.6, 0.6, 0.6);
    cairo_set_line_width(c, 1);
  }
  cairo_rectangle(c, img_x - 2, img_y - 2, cell.image.width * scale + 4.0, cell.image.height * scale + 4.0);
  cairo_stroke(c);

  const double text_x = x0 + kPad;
  const double text_w = g.cell_w - 2.0 * kPad;
  const double line1 = img_y + g.max_h * scale + kPad + kLine - 2;
  const int percent = static_cast<int>(std::lround(cell.probability * 100));
  if (cell.wrong) {
    cairo_set_source_rgb(c, 0.85, 0.1, 0.1);
  } else {
    cairo_set_source_rgb(c, 0, 0, 0);
  }
  Caption(c, absl::StrCat(cell.wrong ? "X " : "", cell.predicted, " ", percent, "%"), text_x, line1, text_w);
  if (!cell.truth.empty()) {
    cairo_set_source_rgb(c, 0.35, 0.35, 0.35);
    Caption(c, absl::StrCat("true: ", cell.truth), text_x, line1 + kLine, text_w);
  }
}

}  // namespace

absl::Status RenderGrid(const std::vector<GridCell>& cells, const std::string& title, const std::string& path,
                        const GridLayout& layout) {
  absl::StatusOr<GridGeometry> g = PlanGrid(cells, layout);
  if (!g.ok()) return g.status();
  Surface out(cairo_image_surface_create(CAIRO_FORMAT_RGB24, static_cast<int>(g->width), static_cast<int>(g->height)));
  Context cr(cairo_create(out.get()));
  cairo_t* c = cr.get();
  DrawTitle(c, title, g->width);
  for (size_t i = 0; i < cells.size(); ++i) DrawCell(c, cells[i], i, *g);
  if (cairo_status_t st = cairo_status(c); st != CAIRO_STATUS_SUCCESS) {
    return absl::InternalError(absl::StrCat("drawing ", path, ": ", cairo_status_to_string(st)));
  }
  cairo_surface_flush(out.get());
  if (cairo_status_t st = cairo_surface_write_to_png(out.get(), path.c_str()); st != CAIRO_STATUS_SUCCESS) {
    return absl::InternalError(absl::StrCat("cannot write ", path, ": ", cairo_status_to_string(st)));
  }
  return absl::OkStatus();
}

}  // namespace dtrain::predict
