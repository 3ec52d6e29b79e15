//===- driver/MemoryTimeline.cpp - The memory timeline plot ---------------===//
#include "driver/Plots.h"

#include "driver/Svg.h"
#include "passes/Liveness.h"
#include "session/MemoryReport.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>

namespace remat::driver {

using namespace svg;

std::string getMemoryTimelineSvg(const ir::Graph &graph) {
  passes::Liveness liveness(graph);
  const ir::MemoryPlan *plan = graph.getMemoryPlan();
  llvm::ArrayRef<const ir::Node *> schedule = liveness.getSchedule();
  llvm::ArrayRef<uint64_t> live = liveness.getLiveBytes();
  size_t n = schedule.size();
  uint64_t persistent = liveness.getWeightBytes() + liveness.getInputBytes();
  uint64_t livePeak = persistent + liveness.getPeakBytes();
  uint64_t plannedPeak = plan ? persistent + plan->arenaBytes : livePeak;
  constexpr double kMiB = 1 << 20;

  // Plot area.
  // Integers so that the stream prints them plainly; computed coordinates go
  // through fmt().
  const int width = 1000, height = 520;
  const int left = 90, right = 30, top = 50, bottom = 110;
  const int plotW = width - left - right, plotH = height - top - bottom;
  double maxMiB = double(std::max(livePeak, plannedPeak)) / kMiB;
  double yStep = niceStep(maxMiB > 0 ? maxMiB : 1, 8);
  double yMax = yStep * std::max(1.0, std::ceil(maxMiB * 1.05 / yStep));
  double positions = double(std::max<size_t>(n, 1));
  // Node i spans [i, i + 1) on the x axis; its point is at i + 0.5.
  auto x = [&](double position) {
    return double(left) + position / positions * double(plotW);
  };
  auto y = [&](uint64_t bytes) {
    return double(top + plotH) - double(bytes) / kMiB / yMax * double(plotH);
  };

  std::string svg;
  llvm::raw_string_ostream os(svg);
  std::string title = ("@" + llvm::Twine(escapeXml(graph.getName()))).str();
  os << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
     << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width
     << "\" height=\"" << height << "\" viewBox=\"0 0 " << width << ' '
     << height << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
     << "<title>" << title << " memory timeline</title>\n"
     << "<rect x=\"0\" y=\"0\" width=\"" << width << "\" height=\"" << height
     << "\" fill=\"white\"/>\n"
     << "<text x=\"" << width / 2 << "\" y=\"28\" text-anchor=\"middle\" "
     << "font-size=\"16\" font-weight=\"bold\">" << title << "</text>\n";

  // Stage ranges: maximal runs of one stage.
  struct StageStyle {
    ir::Stage stage;
    const char *label;
    const char *colour;
  };
  const StageStyle styles[] = {{ir::Stage::Forward, "forward", "#dbe9f6"},
                               {ir::Stage::Backward, "backward", "#fde3c8"},
                               {ir::Stage::Recompute, "recompute", "#d7f0d0"}};
  auto colourOf = [&](ir::Stage stage) {
    for (const StageStyle &style : styles)
      if (style.stage == stage)
        return style.colour;
    llvm_unreachable("unknown stage");
  };
  os << "<g class=\"stages\" stroke=\"none\">\n";
  for (size_t begin = 0; begin < n;) {
    size_t end = begin + 1;
    while (end < n && schedule[end]->getStage() == schedule[begin]->getStage())
      ++end;
    os << "<rect class=\"" << ir::stageName(schedule[begin]->getStage())
       << "\" x=\"" << fmt(x(double(begin))) << "\" y=\"" << top
       << "\" width=\"" << fmt(x(double(end)) - x(double(begin)))
       << "\" height=\"" << plotH << "\" fill=\""
       << colourOf(schedule[begin]->getStage()) << "\"/>\n";
    begin = end;
  }
  os << "</g>\n";

  // Axes, ticks and grid.
  os << "<g class=\"axes\" stroke=\"#888\" stroke-width=\"1\">\n";
  for (double tick = 0; tick <= yMax + yStep / 2; tick += yStep) {
    double ty = double(top + plotH) - tick / yMax * double(plotH);
    os << "<line x1=\"" << left << "\" y1=\"" << fmt(ty) << "\" x2=\""
       << left + plotW << "\" y2=\"" << fmt(ty) << "\" stroke=\"#ddd\"/>\n"
       << "<text x=\"" << left - 6 << "\" y=\"" << fmt(ty + 4)
       << "\" text-anchor=\"end\" stroke=\"none\" fill=\"black\">"
       << fmtTick(tick) << " MiB</text>\n";
  }
  double xStep = niceStep(positions, 10);
  for (double tick = 0; tick <= positions; tick += xStep)
    os << "<line x1=\"" << fmt(x(tick)) << "\" y1=\"" << top + plotH
       << "\" x2=\"" << fmt(x(tick)) << "\" y2=\"" << top + plotH + 5
       << "\"/>\n"
       << "<text x=\"" << fmt(x(tick)) << "\" y=\"" << top + plotH + 18
       << "\" text-anchor=\"middle\" stroke=\"none\" fill=\"black\">"
       << fmtTick(tick) << "</text>\n";
  os << "<rect x=\"" << left << "\" y=\"" << top << "\" width=\"" << plotW
     << "\" height=\"" << plotH << "\" fill=\"none\"/>\n"
     << "</g>\n"
     << "<text x=\"" << left + plotW / 2 << "\" y=\"" << top + plotH + 36
     << "\" text-anchor=\"middle\">schedule position (node index)</text>\n"
     << "<text x=\"18\" y=\"" << top + plotH / 2
     << "\" text-anchor=\"middle\" transform=\"rotate(-90 18 "
     << top + plotH / 2 << ")\">live bytes (MiB): persistent + "
     << (plan ? "live arena" : "liveness") << "</text>\n";

  // Live bytes: a filled area under a polyline, thinned to the minimum and
  // maximum of each of at most 1000 buckets (in position order).
  if (n != 0) {
    size_t bucket = (n + 999) / 1000;
    std::string points;
    auto addPoint = [&](size_t i) {
      points +=
          fmt(x(double(i) + 0.5)) + "," + fmt(y(persistent + live[i])) + " ";
    };
    for (size_t begin = 0; begin < n; begin += bucket) {
      size_t end = std::min(n, begin + bucket);
      size_t lo = begin, hi = begin;
      for (size_t i = begin; i < end; ++i) {
        if (live[i] < live[lo])
          lo = i;
        if (live[i] > live[hi])
          hi = i;
      }
      addPoint(std::min(lo, hi));
      if (lo != hi)
        addPoint(std::max(lo, hi));
    }
    std::string area = fmt(x(0.5)) + "," + fmt(y(0)) + " " + points +
                       fmt(x(double(n) - 0.5)) + "," + fmt(y(0));
    os << "<polygon class=\"live-area\" points=\"" << area
       << "\" fill=\"#4a7ebb\" fill-opacity=\"0.25\" stroke=\"none\"/>\n"
       << "<polyline class=\"live\" points=\""
       << llvm::StringRef(points).rtrim()
       << "\" fill=\"none\" stroke=\"#1f4e8c\" stroke-width=\"1.5\"/>\n";
  }

  // The persistent floor and, with a plan, the planned peak.
  os << "<line class=\"persistent\" x1=\"" << left << "\" y1=\""
     << fmt(y(persistent)) << "\" x2=\"" << left + plotW << "\" y2=\""
     << fmt(y(persistent)) << "\" stroke=\"#777\" stroke-dasharray=\"2,3\"/>\n";
  if (plan)
    os << "<line class=\"planned-peak\" x1=\"" << left << "\" y1=\""
       << fmt(y(plannedPeak)) << "\" x2=\"" << left + plotW << "\" y2=\""
       << fmt(y(plannedPeak))
       << "\" stroke=\"#7a3d9a\" stroke-dasharray=\"6,4\"/>\n"
       << "<text x=\"" << left + 4 << "\" y=\"" << fmt(y(plannedPeak) - 4)
       << "\" fill=\"#7a3d9a\">planned peak (persistent + arena) "
       << fmt(double(plannedPeak) / kMiB) << " MiB (" << plannedPeak
       << " B)</text>\n";

  // The peak.
  if (liveness.getPeakNode()) {
    double px = x(double(liveness.getPeakIndex()) + 0.5);
    bool labelLeft = px > left + plotW / 2;
    os << "<line class=\"peak\" x1=\"" << fmt(px) << "\" y1=\"" << top
       << "\" x2=\"" << fmt(px) << "\" y2=\"" << top + plotH
       << "\" stroke=\"#c0392b\" stroke-width=\"1.5\"/>\n"
       << "<text class=\"peak-label\" x=\"" << fmt(px + (labelLeft ? -6 : 6))
       << "\" y=\"" << top + 16 << "\" text-anchor=\""
       << (labelLeft ? "end" : "start") << "\" fill=\"#c0392b\">peak "
       << fmt(double(livePeak) / kMiB) << " MiB (" << livePeak << " B) at node "
       << liveness.getPeakIndex() << ": "
       << escapeXml(session::describePeak(liveness)) << "</text>\n";
  }

  // Legend, below the x axis label.
  int ly = height - 40, lx = left;
  os << "<g class=\"legend\">\n";
  for (const StageStyle &style : styles) {
    os << "<rect x=\"" << lx << "\" y=\"" << ly - 10
       << "\" width=\"14\" height=\"14\" fill=\"" << style.colour
       << "\" stroke=\"#888\"/>\n"
       << "<text x=\"" << lx + 20 << "\" y=\"" << ly + 1 << "\">" << style.label
       << "</text>\n";
    lx += 110;
  }
  auto legendLine = [&](const char *colour, const char *dash,
                        llvm::StringRef label) {
    os << "<line x1=\"" << lx << "\" y1=\"" << ly - 3 << "\" x2=\"" << lx + 24
       << "\" y2=\"" << ly - 3 << "\" stroke=\"" << colour
       << "\" stroke-width=\"2\"" << dash << "/>\n"
       << "<text x=\"" << lx + 30 << "\" y=\"" << ly + 1 << "\">" << label
       << "</text>\n";
    lx += 40 + 7 * int(label.size());
  };
  legendLine("#1f4e8c", "", "live bytes");
  legendLine("#c0392b", "", "peak");
  legendLine("#777", " stroke-dasharray=\"2,3\"", "persistent");
  if (plan)
    legendLine("#7a3d9a", " stroke-dasharray=\"6,4\"", "planned peak");
  os << "</g>\n</svg>\n";
  os.flush();
  return svg;
}

} // namespace remat::driver
