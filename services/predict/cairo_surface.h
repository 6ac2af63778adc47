// Owning handles for cairo objects and the gray-to-surface conversion that both the
// PNG writer and the grid picture need. Private to services/predict.
#pragma once

#include <cairo.h>

#include <memory>

#include "services/predict/gray_image.h"
#include "services/predict/model_image.h"

namespace dtrain::predict {

struct SurfaceDeleter {
  void operator()(cairo_surface_t* s) const { cairo_surface_destroy(s); }
};
struct ContextDeleter {
  void operator()(cairo_t* c) const { cairo_destroy(c); }
};
using Surface = std::unique_ptr<cairo_surface_t, SurfaceDeleter>;
using Context = std::unique_ptr<cairo_t, ContextDeleter>;

// An RGB24 surface with equal channels (so a PNG of it reads back as plain gray).
// Check cairo_surface_status: a too-large image gives an error surface.
Surface GraySurface(const GrayImage& image);

// An RGB24 surface of a 3-channel image (planes red, green, blue); any other channel
// count is drawn as gray from its first plane.
Surface ImageSurface(const ModelImage& image);

}  // namespace dtrain::predict
