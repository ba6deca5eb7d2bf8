// Colours of the workstation, one place, so views agree and the screenshot
// test can look for exactly the colour a lane's slices are drawn in.
#pragma once

#include <cstdint>

#include "ui/app/trace_model.h"

namespace shardscope::app {

struct Rgb {
  uint8_t r, g, b;
  // ImGui's packed ABGR, opaque.
  uint32_t Packed(uint8_t alpha = 255) const {
    return (uint32_t(alpha) << 24) | (uint32_t(b) << 16) | (uint32_t(g) << 8) | uint32_t(r);
  }
  Rgb Scaled(float f) const {
    auto s = [f](uint8_t c) { return static_cast<uint8_t>(c * f > 255 ? 255 : c * f); };
    return {s(r), s(g), s(b)};
  }
};

inline Rgb KindColor(SliceKind kind) {
  switch (kind) {
    case SliceKind::kCompute: return {70, 130, 200};     // blue
    case SliceKind::kCollective: return {225, 140, 50};  // orange
    case SliceKind::kTransfer: return {150, 100, 200};   // violet
    case SliceKind::kHost: return {110, 170, 110};       // green
    case SliceKind::kCompile: return {210, 70, 70};      // red
    case SliceKind::kHostWait: return {62, 66, 76};      // muted: a wait, not work
  }
  return {128, 128, 128};
}

// Waiting for the host: hatched over KindColor(kHostWait), labelled in dim text.
inline constexpr Rgb kHostWaitHatch{96, 101, 114};

// Behind a folded block or summary column: its extent, drawn under the
// busy part (whose height is the busy fraction), so a sparse fold reads as
// sparse and never passes for one long slice.
inline constexpr Rgb kFoldBackground{52, 56, 66};
inline constexpr Rgb kStepMarker{120, 126, 140};
inline constexpr Rgb kFlow{250, 230, 120};
inline constexpr Rgb kLastArrival{255, 80, 80};
inline constexpr Rgb kSelection{255, 255, 255};
inline constexpr Rgb kCounterLine{110, 200, 210};
inline constexpr Rgb kCounterBand{50, 95, 105};
inline constexpr Rgb kGroupHeader{30, 33, 39};
inline constexpr Rgb kSectionHeader{20, 22, 26};

inline Rgb CompileColor(bool miss) { return miss ? Rgb{220, 60, 60} : Rgb{90, 170, 120}; }

inline constexpr Rgb kBackground{24, 26, 30};
inline constexpr Rgb kLaneEven{34, 37, 43};
inline constexpr Rgb kLaneOdd{40, 43, 50};
inline constexpr Rgb kText{225, 225, 225};
inline constexpr Rgb kDimText{150, 155, 165};
inline constexpr Rgb kClockLabel{240, 200, 90};
// Something the user should look at: involuntary full rematerializations.
inline constexpr Rgb kWarning{235, 110, 80};

}  // namespace shardscope::app
