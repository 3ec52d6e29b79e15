//===- driver/SweepPlot.cpp - remat-sweep's trade-off plot ----------------===//
#include "driver/Plots.h"

#include "driver/Svg.h"
#include "ir/Support.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Format.h"

#include <algorithm>
#include <cmath>

namespace remat::driver {

using namespace session;
using namespace svg;

namespace {

/// The marker of \p strategy centred at (x, y).
std::string getMarker(llvm::StringRef strategy, double x, double y,
                      llvm::StringRef fill, llvm::StringRef stroke) {
  constexpr double r = 6;
  std::string style =
      ("fill=\"" + fill + "\" stroke=\"" + stroke + "\" stroke-width=\"1.5\"")
          .str();
  auto polygon = [&](std::vector<std::pair<double, double>> points) {
    std::string text = "<polygon points=\"";
    for (auto [dx, dy] : points)
      text += fmt(x + dx) + "," + fmt(y + dy) + " ";
    text.pop_back();
    return text + "\" " + style + "/>";
  };
  if (strategy == "every-layer")
    return "<rect x=\"" + fmt(x - r) + "\" y=\"" + fmt(y - r) +
           "\" width=\"" + fmt(2 * r) + "\" height=\"" + fmt(2 * r) + "\" " +
           style + "/>";
  if (strategy == "sqrt")
    return polygon({{0, -r - 1}, {r + 1, 0}, {0, r + 1}, {-r - 1, 0}});
  if (strategy == "chain-dp")
    return polygon({{0, -r - 1}, {r + 1, r}, {-r - 1, r}});
  if (strategy == "selective")
    return polygon({{0, r + 1}, {r + 1, -r}, {-r - 1, -r}});
  if (strategy == "auto") {
    std::vector<std::pair<double, double>> star;
    for (int k = 0; k < 10; ++k) {
      double angle = M_PI / 5 * k - M_PI / 2;
      double radius = k % 2 ? r * 0.45 : r * 1.2;
      star.push_back({radius * std::cos(angle), radius * std::sin(angle)});
    }
    return polygon(star);
  }
  return "<circle cx=\"" + fmt(x) + "\" cy=\"" + fmt(y) + "\" r=\"" + fmt(r) +
         "\" " + style + "/>";
}

} // namespace

std::string getSweepSvg(const SweepResult &result) {
  constexpr int width = 900, height = 560;
  constexpr int left = 80, right = 250, top = 56, bottom = 64;
  constexpr int plotW = width - left - right, plotH = height - top - bottom;
  constexpr double kMiB = 1 << 20, kGiB = 1 << 30;

  // A row is drawn when it has the figures the plot shows: with --measure,
  // measured ones.
  auto isDrawn = [&](const SweepRow &row) {
    return row.feasible && (!result.measured || row.measured);
  };
  // The extent of every drawn point, remat's and the peers'.
  double minBytes = 0, maxBytes = 0, minRatio = 1, maxRatio = 1;
  bool any = false;
  auto extend = [&](double bytes, double ratio) {
    minBytes = any ? std::min(minBytes, bytes) : bytes;
    maxBytes = any ? std::max(maxBytes, bytes) : bytes;
    minRatio = std::min(minRatio, ratio);
    maxRatio = std::max(maxRatio, ratio);
    any = true;
  };
  for (const SweepRow &row : result.rows)
    if (isDrawn(row))
      extend(double(row.getPeakBytes()), row.getTimeRatio());
  for (const PeerPoint &peer : result.peers)
    extend(double(peer.peakBytes), peer.timeRatio);
  if (!any)
    extend(double(result.noRematPeakBytes), 1);
  bool inGiB = maxBytes >= 2 * kGiB;
  double unit = inGiB ? kGiB : kMiB;
  llvm::StringRef unitName = inGiB ? "GiB" : "MiB";
  double xStep = niceStep((maxBytes - minBytes) / unit * 1.1 + 1e-9, 8);
  double xLow = std::floor(minBytes / unit / xStep) * xStep;
  double xHigh = std::ceil(maxBytes / unit / xStep) * xStep;
  if (xHigh - xLow < xStep)
    xHigh = xLow + xStep;
  if (maxBytes / unit > xHigh - xStep * 0.05)
    xHigh += xStep;
  double yStep = niceStep((maxRatio - minRatio) * 1.1 + 1e-9, 8);
  double yLow = std::floor(minRatio / yStep) * yStep;
  double yHigh = std::ceil(maxRatio / yStep) * yStep;
  if (yHigh - yLow < yStep)
    yHigh = yLow + yStep;
  if (maxRatio > yHigh - yStep * 0.05)
    yHigh += yStep;
  auto x = [&](double bytes) {
    return left + (bytes / unit - xLow) / (xHigh - xLow) * plotW;
  };
  auto y = [&](double ratio) {
    return top + plotH - (ratio - yLow) / (yHigh - yLow) * plotH;
  };

  std::string svg;
  llvm::raw_string_ostream os(svg);
  os << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width
     << "\" height=\"" << height << "\" viewBox=\"0 0 " << width << ' '
     << height << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
     << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  std::string title = "remat-sweep: " + result.model;
  if (!result.bind.empty())
    title += " (" + result.bind + ")";
  os << "<text x=\"" << left << "\" y=\"22\" font-size=\"15\" "
     << "font-weight=\"bold\">" << escapeXml(title) << "</text>\n";
  std::string subtitle =
      result.measured
          ? ("measured: " + result.backend + ", " +
             (result.threads ? std::to_string(result.threads) : std::string("all")) +
             (result.threads == 1 ? " thread" : " threads") + ", median of " +
             std::to_string(result.steps) + " steps, best of " +
             std::to_string(result.rounds) + " rounds" +
             (result.warmup ? " after a warm-up run" : "") +
             "; time relative to remat's none")
          : std::string("planned peaks and predicted step times "
                        "(remat's cost model), relative to none");
  os << "<text x=\"" << left << "\" y=\"40\" fill=\"#555\">"
     << escapeXml(subtitle) << "</text>\n";

  // Grid, ticks and axis titles.
  os << "<g stroke=\"#e4e4e4\">\n";
  for (double t = xLow; t <= xHigh + xStep / 2; t += xStep)
    os << "<line x1=\"" << fmt(x(t * unit)) << "\" y1=\"" << top
       << "\" x2=\"" << fmt(x(t * unit)) << "\" y2=\"" << top + plotH
       << "\"/>\n";
  for (double t = yLow; t <= yHigh + yStep / 2; t += yStep)
    os << "<line x1=\"" << left << "\" y1=\"" << fmt(y(t)) << "\" x2=\""
       << left + plotW << "\" y2=\"" << fmt(y(t)) << "\"/>\n";
  os << "</g>\n<rect x=\"" << left << "\" y=\"" << top << "\" width=\""
     << plotW << "\" height=\"" << plotH
     << "\" fill=\"none\" stroke=\"#333\"/>\n";
  for (double t = xLow; t <= xHigh + xStep / 2; t += xStep)
    os << "<text x=\"" << fmt(x(t * unit)) << "\" y=\"" << top + plotH + 18
       << "\" text-anchor=\"middle\">" << fmtTick(t) << ' ' << unitName
       << "</text>\n";
  for (double t = yLow; t <= yHigh + yStep / 2; t += yStep)
    os << "<text x=\"" << left - 8 << "\" y=\"" << fmt(y(t) + 4)
       << "\" text-anchor=\"end\">x" << llvm::format("%.2f", t) << "</text>\n";
  os << "<text x=\"" << left + plotW / 2 << "\" y=\"" << height - 16
     << "\" text-anchor=\"middle\">peak memory (weights + inputs + arena"
     << (result.measured ? ", measured" : ", planned") << ")</text>\n"
     << "<text transform=\"translate(20," << top + plotH / 2
     << ") rotate(-90)\" text-anchor=\"middle\">step time relative to "
     << "none</text>\n";

  // The Pareto front as a line through its points, smallest first.
  std::vector<const SweepRow *> front;
  for (const SweepRow &row : result.rows)
    if (row.feasible && row.pareto)
      front.push_back(&row);
  llvm::sort(front, [](const SweepRow *a, const SweepRow *b) {
    return a->getPeakBytes() < b->getPeakBytes();
  });
  if (front.size() > 1) {
    os << "<polyline fill=\"none\" stroke=\"#c0392b\" stroke-width=\"2\" "
       << "points=\"";
    for (const SweepRow *row : front)
      os << fmt(x(double(row->getPeakBytes()))) << ','
         << fmt(y(row->getTimeRatio())) << ' ';
    os << "\"/>\n";
  }

  // The markers: remat's points, then the peers'.
  struct Box {
    double x0, y0, x1, y1;
    bool overlaps(const Box &other) const {
      return x0 < other.x1 && other.x0 < x1 && y0 < other.y1 && other.y0 < y1;
    }
  };
  std::vector<Box> taken;
  for (const SweepRow &row : result.rows) {
    if (!isDrawn(row))
      continue;
    double px = x(double(row.getPeakBytes())), py = y(row.getTimeRatio());
    os << "<g><title>" << escapeXml(row.getLabel());
    if (!row.alsoPoints.empty())
      os << " (also " << escapeXml(llvm::join(row.alsoPoints, ", ")) << ")";
    os << ": " << formatBytes(row.getPeakBytes()) << ", x"
       << llvm::format("%.3f", row.getTimeRatio()) << "</title>"
       << getMarker(row.strategy, px, py, row.pareto ? "#1f4e8c" : "#9db5d6",
                    "#1f4e8c")
       << "</g>\n";
    taken.push_back({px - 7, py - 7, px + 7, py + 7});
  }
  for (const PeerPoint &peer : result.peers) {
    double px = x(double(peer.peakBytes)), py = y(peer.timeRatio);
    os << "<g><title>" << escapeXml(peer.label) << ": "
       << formatBytes(peer.peakBytes) << ", x" << llvm::format("%.3f", peer.timeRatio)
       << "</title><circle cx=\"" << fmt(px) << "\" cy=\"" << fmt(py)
       << "\" r=\"6\" fill=\"#e67e22\" stroke=\"#a04000\" "
       << "stroke-width=\"1.5\"/></g>\n";
    taken.push_back({px - 7, py - 7, px + 7, py + 7});
  }

  // Labels, most important first, each at the first place around its point
  // that covers no marker and no earlier label: the seed's point, the
  // peers, the front. A label with no free place is left to the marker's
  // tooltip.
  auto label = [&](double px, double py, llvm::StringRef text,
                   llvm::StringRef colour, int fontSize, bool force) {
    double w = 0.6 * fontSize * double(text.size()), h = fontSize + 2;
    // Beside the point first; a label that must be drawn may move further
    // away, with a leader line back to its point.
    std::vector<std::pair<double, double>> offsets = {
        {9, -6}, {9, 4 + h}, {-9 - w, -6}, {-9 - w, 4 + h},
        {-w / 2, -10}, {-w / 2, 12 + h}};
    if (force)
      for (double dy : {-34.0, 40.0, -58.0, 64.0, -82.0, 88.0})
        for (double dx : {10.0, -w / 2, -w - 10})
          offsets.push_back({dx, dy});
    auto place = [&](double dx, double dy) {
      return Box{px + dx, py + dy - h + 2, px + dx + w, py + dy + 2};
    };
    auto fits = [&](const Box &box) {
      return box.x0 >= left && box.x1 <= left + plotW && box.y0 >= top &&
             box.y1 <= top + plotH &&
             llvm::none_of(taken,
                           [&](const Box &other) { return box.overlaps(other); });
    };
    auto found = llvm::find_if(offsets, [&](const std::pair<double, double> &o) {
      return fits(place(o.first, o.second));
    });
    if (found == offsets.end() && !force)
      return;
    auto [dx, dy] = found != offsets.end() ? *found : offsets.front();
    // A forced label with no free place stays inside the plot.
    dx = std::clamp(px + dx, double(left), left + plotW - w) - px;
    Box box = place(dx, dy);
    taken.push_back(box);
    if (std::abs(dy) > 20)
      os << "<line x1=\"" << fmt(px) << "\" y1=\"" << fmt(py) << "\" x2=\""
         << fmt(std::clamp(px, box.x0, box.x1)) << "\" y2=\""
         << fmt(dy < 0 ? box.y1 : box.y0) << "\" stroke=\"" << colour
         << "\" stroke-width=\"0.8\"/>\n";
    os << "<text x=\"" << fmt(px + dx) << "\" y=\"" << fmt(py + dy)
       << "\" fill=\"" << colour << "\" font-size=\"" << fontSize << "\">"
       << escapeXml(text) << "</text>\n";
  };
  for (const SweepRow &row : result.rows)
    if (isDrawn(row) && row.strategy == "every-layer")
      label(x(double(row.getPeakBytes())), y(row.getTimeRatio()),
            "every-layer (the seed's per-layer checkpointing)", "#1f4e8c", 12,
            /*force=*/true);
  for (const PeerPoint &peer : result.peers)
    label(x(double(peer.peakBytes)), y(peer.timeRatio), peer.label, "#a04000",
          11, /*force=*/true);
  for (const SweepRow &row : result.rows)
    if (row.feasible && row.pareto && row.strategy != "every-layer")
      label(x(double(row.getPeakBytes())), y(row.getTimeRatio()),
            row.getLabel(), "#555", 10, /*force=*/false);

  // Legend: one entry per strategy drawn, the front, the peers.
  int lx = left + plotW + 20, ly = top + 10;
  os << "<g>\n";
  llvm::StringSet<> drawn;
  for (const SweepRow &row : result.rows) {
    if (!isDrawn(row) || !drawn.insert(row.strategy).second)
      continue;
    os << getMarker(row.strategy, lx + 8, ly, "#1f4e8c", "#1f4e8c")
       << "<text x=\"" << lx + 22 << "\" y=\"" << ly + 4 << "\">"
       << escapeXml(row.strategy) << "</text>\n";
    ly += 22;
  }
  os << "<line x1=\"" << lx << "\" y1=\"" << ly << "\" x2=\"" << lx + 16
     << "\" y2=\"" << ly << "\" stroke=\"#c0392b\" stroke-width=\"2\"/>"
     << "<text x=\"" << lx + 22 << "\" y=\"" << ly + 4
     << "\">Pareto front (filled)</text>\n";
  ly += 22;
  if (!result.peers.empty())
    os << "<circle cx=\"" << lx + 8 << "\" cy=\"" << ly
       << "\" r=\"6\" fill=\"#e67e22\" stroke=\"#a04000\"/>"
       << "<text x=\"" << lx + 22 << "\" y=\"" << ly + 4
       << "\">peers (--peers)</text>\n";
  os << "</g>\n</svg>\n";
  os.flush();
  return svg;
}

} // namespace remat::driver
