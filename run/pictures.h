// run/pictures.h: heatmaps as PNG files (stb_image_write, Debian's libstb-dev), so that a
// run's masks and attention maps can be seen, not only read. Host only.
//
// A picture is a grid of panels, one (T,T) matrix each: rows of the grid are layers, columns
// are heads. Entry (i, j) of a panel, query i and key j, is a square of `cell` pixels, row i
// drawn from the top, column j from the left, with a white gap between panels. Values map
// linearly from [lo, hi] onto the viridis colour scale: dark purple is lo, yellow is hi.
#pragma once
#define STB_IMAGE_WRITE_STATIC  // private to this file's includer: one copy per program
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb/stb_image_write.h>
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>
#include "layers/errors.h"    // fail()
#include "run/atomic_file.h"  // write_file

// viridis at nine evenly spaced points (matplotlib's colour map), interpolated linearly
inline void viridis(double t, unsigned char* rgb) {
    static const unsigned char stops[9][3] = {{68, 1, 84},    {71, 45, 123},  {59, 82, 139},
                                              {44, 114, 142}, {33, 145, 140}, {39, 173, 129},
                                              {92, 200, 99},  {170, 220, 50}, {253, 231, 37}};
    t = std::min(1.0, std::max(0.0, std::isfinite(t) ? t : 0.0)) * 8;
    int k = std::min(7, (int)t);
    double f = t - k;
    for (int c = 0; c < 3; c++) rgb[c] = (unsigned char)std::lround(stops[k][c] * (1 - f) + stops[k + 1][c] * f);
}

// Writes an RGB picture, rgb (height, width, 3), as a PNG file through path.tmp (run/atomic_file.h).
// It is encoded in memory first: stbi_write_png does not check its own writes.
inline void write_png(const std::string& path, int width, int height, const std::vector<unsigned char>& rgb) {
    std::string png;
    auto append = [](void* context, void* data, int size) {
        static_cast<std::string*>(context)->append(static_cast<const char*>(data), size);
    };
    if (!stbi_write_png_to_func(append, &png, width, height, 3, rgb.data(), width * 3))
        fail("cannot encode %s as PNG", path.c_str());
    write_file(path, png, false);  // without the fault points: see run/atomic_file.h
}

struct Heatmap {
    int T = 0, grid_rows = 0, grid_cols = 0;
    std::vector<float> values;  // (grid_rows, grid_cols, T, T)
    double lo = 0, hi = 1;
};

// Pixels per entry: a panel is about 256 pixels wide, an entry never less than 2.
inline int heatmap_cell(int T) { return std::max(2, 256 / T); }
constexpr int HEATMAP_GAP = 8;

// the picture's size: panels of T·cell pixels with a gap between neighbours
inline int heatmap_width(const Heatmap& h) {
    return h.grid_cols * (h.T * heatmap_cell(h.T) + HEATMAP_GAP) - HEATMAP_GAP;
}
inline int heatmap_height(const Heatmap& h) {
    return h.grid_rows * (h.T * heatmap_cell(h.T) + HEATMAP_GAP) - HEATMAP_GAP;
}

inline void write_heatmap(const std::string& path, const Heatmap& h) {
    const int cell = heatmap_cell(h.T), panel = h.T * cell + HEATMAP_GAP;
    const int width = heatmap_width(h), height = heatmap_height(h);
    std::vector<unsigned char> image((size_t)width * height * 3, 255);  // white
    const double span = h.hi > h.lo ? h.hi - h.lo : 1;
    for (int gr = 0; gr < h.grid_rows; gr++)
        for (int gc = 0; gc < h.grid_cols; gc++) {
            const float* m = h.values.data() + ((size_t)gr * h.grid_cols + gc) * h.T * h.T;
            for (int i = 0; i < h.T; i++)
                for (int j = 0; j < h.T; j++) {
                    unsigned char rgb[3];
                    viridis((m[i * h.T + j] - h.lo) / span, rgb);
                    for (int y = 0; y < cell; y++)
                        for (int x = 0; x < cell; x++) {
                            size_t px = ((size_t)(gr * panel + i * cell + y) * width + gc * panel + j * cell + x) * 3;
                            std::copy(rgb, rgb + 3, image.begin() + px);
                        }
                }
        }
    write_png(path, width, height, image);
}

// One image beside attention maps over its patch grid, as PNG: a row per layer, each row the
// image (grey or RGB, values in [0, 1]) and then its maps, each map stretched over the image's
// size and scaled to its own maximum (viridis: dark 0, yellow the map's largest weight), so
// where a query looks shows whatever the spread of the weights.
struct ImageAttention {
    int channels = 0, height = 0, width = 0;
    std::vector<float> image;  // (channels, height, width) in [0, 1]
    int grid_rows = 0, grid_cols = 0, layers = 0, maps_per_layer = 0;
    std::vector<float> maps;   // (layers, maps_per_layer, grid_rows, grid_cols)
};

inline void write_image_attention(const std::string& path, const ImageAttention& p) {
    const int scale = std::max(1, 128 / std::max(p.height, p.width));  // image pixels to picture pixels
    const int panel_w = p.width * scale, panel_h = p.height * scale, columns = 1 + p.maps_per_layer;
    const int width = columns * (panel_w + HEATMAP_GAP) - HEATMAP_GAP;
    const int height = p.layers * (panel_h + HEATMAP_GAP) - HEATMAP_GAP;
    const size_t plane = (size_t)p.height * p.width;
    std::vector<unsigned char> picture((size_t)width * height * 3, 255);  // white
    for (int l = 0; l < p.layers; l++)
        for (int col = 0; col < columns; col++) {
            const float* map = p.maps.data() + ((size_t)l * p.maps_per_layer + col - 1) * p.grid_rows * p.grid_cols;
            const float top = col == 0 ? 1.0f : *std::max_element(map, map + p.grid_rows * p.grid_cols);
            for (int y = 0; y < panel_h; y++)
                for (int x = 0; x < panel_w; x++) {
                    const int iy = y / scale, ix = x / scale;
                    unsigned char rgb[3];
                    if (col == 0) {
                        for (int c = 0; c < 3; c++) {
                            const float v = p.image[(p.channels == 3 ? c : 0) * plane + (size_t)iy * p.width + ix];
                            rgb[c] = (unsigned char)std::lround(255 * std::min(1.0f, std::max(0.0f, v)));
                        }
                    } else {
                        const int gy = iy * p.grid_rows / p.height, gx = ix * p.grid_cols / p.width;
                        viridis(top > 0 ? map[gy * p.grid_cols + gx] / top : 0.0, rgb);
                    }
                    const size_t px = ((size_t)(l * (panel_h + HEATMAP_GAP) + y) * width +
                                       col * (panel_w + HEATMAP_GAP) + x) * 3;
                    std::copy(rgb, rgb + 3, picture.begin() + px);
                }
        }
    write_png(path, width, height, picture);
}
