// The timeline draws each lane's level-of-detail shapes into one image (an
// atlas of every visible lane, a few screen widths wide) on the CPU, and a
// frame shows it as one textured quad per lane: the renderer's work follows
// the screen's pixels, not the number of shapes, and a frame that only pans
// moves the quads. The image is redrawn only for a lane whose data, zoom or
// place changed, or when the view pans past the image's margin.
//
// The views know no OpenGL: the shell (app.cc) gives them a TextureHost that
// turns images into textures. Without one (tests without GL) images are still
// drawn on the CPU, but nothing is shown.
#pragma once

#include <imgui.h>

#include <cstdint>
#include <vector>

namespace shardscope::app {

class TextureHost {
 public:
  virtual ~TextureHost() = default;
  // A new texture, with no storage yet.
  virtual ImTextureID Create() = 0;
  // (Re)allocates `id` as w x h RGBA and uploads `pixels` (w * h, top row
  // first, in ImGui's packing: bytes R, G, B, A).
  virtual void Upload(ImTextureID id, int w, int h, const uint32_t* pixels) = 0;
  // Replaces rows [y0, y0 + rows) of `id`, which is `w` wide, from `pixels`
  // (row y0 first).
  virtual void UploadRows(ImTextureID id, int w, int y0, int rows, const uint32_t* pixels) = 0;
  virtual void Release(ImTextureID id) = 0;
  // A draw-list callback turning blending off for the opaque images that
  // follow it (ImDrawCallback_ResetRenderState turns it back on); null: none.
  virtual ImDrawCallback OpaqueBegin() const { return nullptr; }
};

// A CPU image: w x h pixels in ImGui's packed colours, top row first.
struct LaneImage {
  int w = 0, h = 0;
  std::vector<uint32_t> px;

  void Resize(int width, int height) {
    w = width;
    h = height;
    px.assign(static_cast<size_t>(w) * h, 0);
  }
  uint32_t At(int x, int y) const { return px[static_cast<size_t>(y) * w + x]; }
  // Fills [x0, x1) x [y0, y1), clipped to the image.
  void Fill(int x0, int x1, int y0, int y1, uint32_t color) {
    x0 = x0 < 0 ? 0 : x0;
    y0 = y0 < 0 ? 0 : y0;
    x1 = x1 > w ? w : x1;
    y1 = y1 > h ? h : y1;
    for (int y = y0; y < y1; ++y) {
      uint32_t* row = &px[static_cast<size_t>(y) * w];
      for (int x = x0; x < x1; ++x) row[x] = color;
    }
  }
};

}  // namespace shardscope::app
