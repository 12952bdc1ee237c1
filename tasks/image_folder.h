// tasks/image_folder.h: an image data set from a folder of image files, one subfolder per class
// (host only, no CUDA), decoded with stb_image (Debian's libstb-dev) into an ImageData
// (tasks/image_files.h): uint8 pixels, channel-first.
//
//   dir/train/<class>/<any name>.png|jpg|jpeg|bmp     (extension case-insensitive)
//   dir/test/<class>/...                              the same class folders as train/
//
// Classes are the subfolders of train/ sorted by name (label 0 is the first); test/ must have
// exactly the same. Within a class, files are taken in name order, so the order is the same on
// every machine. Files with other extensions, and files and folders whose names start with '.'
// (.DS_Store, .ipynb_checkpoints), are skipped.
// Channels: 1 when the first image (train/'s first class, first file) is greyscale, with or
// without alpha, else 3 (RGB); every other image is converted to that count by stb (colour to
// grey by luminance, grey to RGB by copying), and alpha is dropped. Size: every image must have
// the first image's height and width, unless resize > 0: then each image whose size differs is
// resized to resize x resize by the bilinear resize below (pixel centres aligned, edges
// clamped; no antialiasing, so meant for modest factors, not for shrinking large photographs).
// The whole data set is decoded into memory; data sets larger than memory are out of scope, and an
// image may have at most 2^24 pixels (IMAGE_MAX_PIXELS, 4096 x 4096).
//
// Every error is one line, thrown as std::runtime_error, starting with the path concerned.
#pragma once
#define STB_IMAGE_STATIC  // private to this file's includer: one copy per program
#define STB_IMAGE_IMPLEMENTATION
#define STBI_ONLY_PNG  // the decoders of the extensions read here, no others
#define STBI_ONLY_JPEG
#define STBI_ONLY_BMP
#include <stb/stb_image.h>
#include <algorithm>
#include <cctype>
#include <climits>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>
#include "tasks/image_files.h"  // ImageSet, ImageData, image_data_counts

// png, jpg, jpeg or bmp in any case, and not a hidden file
inline bool is_image_file_name(const std::string& name) {
    if (name.empty() || name[0] == '.') return false;
    std::string extension = std::filesystem::path(name).extension().string();
    for (char& c : extension) c = (char)std::tolower((unsigned char)c);
    return extension == ".png" || extension == ".jpg" || extension == ".jpeg" || extension == ".bmp";
}

// The names of the subfolders of dir, sorted, hidden ones left out.
inline std::vector<std::string> sorted_subfolders(const std::string& dir) {
    if (!std::filesystem::is_directory(dir))
        throw std::runtime_error(dir + ": no such folder (an image folder holds train/<class>/ and test/<class>/)");
    std::vector<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(dir))
        if (entry.is_directory() && entry.path().filename().string()[0] != '.')
            names.push_back(entry.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
}

// The paths of the image files in folder, sorted by name; none is an error.
inline std::vector<std::string> sorted_image_files(const std::string& folder) {
    std::vector<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(folder))
        if (entry.is_regular_file() && is_image_file_name(entry.path().filename().string()))
            names.push_back(entry.path().filename().string());
    if (names.empty()) throw std::runtime_error(folder + ": no images (png, jpg, jpeg, bmp) in this class folder");
    std::sort(names.begin(), names.end());
    for (std::string& name : names) name = folder + "/" + name;
    return names;
}

// Bilinear resize of one plane, in (in_h, in_w) -> out (out_h, out_w): output pixel (y, x) samples
// the input at ((y + 0.5) in_h / out_h - 0.5, (x + 0.5) in_w / out_w - 0.5), coordinates clamped to
// the image, blending its four neighbours and rounding to the nearest integer. Same size: a copy.
inline void resize_bilinear(const uint8_t* in, int in_h, int in_w, uint8_t* out, int out_h, int out_w) {
    auto source = [](int o, int in_size, int out_size, int& i0, int& i1, double& frac) {
        double s = std::min(std::max((o + 0.5) * in_size / out_size - 0.5, 0.0), in_size - 1.0);
        i0 = (int)s;
        i1 = std::min(i0 + 1, in_size - 1);
        frac = s - i0;
    };
    for (int y = 0; y < out_h; y++) {
        int y0, y1;
        double fy;
        source(y, in_h, out_h, y0, y1, fy);
        for (int x = 0; x < out_w; x++) {
            int x0, x1;
            double fx;
            source(x, in_w, out_w, x0, x1, fx);
            double top = in[y0 * in_w + x0] * (1 - fx) + in[y0 * in_w + x1] * fx;
            double bottom = in[y1 * in_w + x0] * (1 - fx) + in[y1 * in_w + x1] * fx;
            out[y * out_w + x] = (uint8_t)std::lround(top * (1 - fy) + bottom * fy);
        }
    }
}

constexpr int64_t IMAGE_MAX_PIXELS = 1 << 24;  // 4096 x 4096: a photo of 12 megapixels passes

// What makes a JPEG file unsafe for the stb_image of Debian 12 (libstb-dev, stb_image 2.27), or
// "" (also for any other format). That version decodes two kinds of broken JPEG out of bounds
// (stb issues 1289 and 1291, fixed in stb_image 2.28): a DHT segment whose table declares more
// than 256 codes writes past the table, and a scan that uses a Huffman table no DHT segment has
// defined yet decodes with uninitialised memory (an assertion in stb then aborts the program).
// This walks the segments the way stb reads them: a marker's 2-byte length skips its segment,
// entropy-coded data is skipped byte by byte up to the next marker.
inline std::string jpeg_huffman_problem(const std::vector<uint8_t>& file) {
    if (file.empty() || file[0] != 0xFF) return "";  // stb takes FF ... FF D8 for a JPEG's start, nothing else
    auto byte = [&](size_t i) { return i < file.size() ? file[i] : 0; };  // stb reads 0 past the end
    bool progressive = false, defined[2][4] = {};  // [DC, AC][table]: a DHT segment has defined it
    for (size_t at = 0; at + 4 <= file.size();) {
        const uint8_t marker = file[at + 1];
        if (file[at] != 0xFF || marker == 0xFF) {  // entropy-coded data, or a fill byte
            at++;
            continue;
        }
        if (marker == 0x00 || marker == 0x01 || (marker >= 0xD0 && marker <= 0xD8)) {  // no length
            at += 2;
            continue;
        }
        const size_t begin = at + 4, end = at + 2 + (file[at + 2] << 8 | file[at + 3]);
        if (marker == 0xC2) progressive = true;
        for (size_t t = begin; marker == 0xC4 && t < end;) {  // DHT: class << 4 | id, 16 counts, the codes
            int codes = 0;
            for (int k = 1; k <= 16; k++) codes += byte(t + k);
            if (codes > 256) return "a JPEG Huffman table of " + std::to_string(codes) + " codes, more than 256";
            if (byte(t) >> 4 < 2 && (byte(t) & 15) < 4) defined[byte(t) >> 4][byte(t) & 15] = true;
            t += 17 + codes;
        }
        const int n = byte(begin);  // SOS: n components (id, DC table << 4 | AC table), Ss, Se, Ah << 4 | Al
        if (marker == 0xDA && n >= 1 && n <= 4 && end == begin + 4 + 2 * (size_t)n) {
            const bool dc = !progressive || (byte(begin + 1 + 2 * n) == 0 && byte(begin + 3 + 2 * n) >> 4 == 0);
            const bool ac = !progressive || byte(begin + 1 + 2 * n) > 0;  // progressive: Ss 0 DC, else AC
            for (int c = 0; c < n; c++) {
                const int dc_table = byte(begin + 2 + 2 * c) >> 4, ac_table = byte(begin + 2 + 2 * c) & 15;
                if ((dc && dc_table < 4 && !defined[0][dc_table]) || (ac && ac_table < 4 && !defined[1][ac_table]))
                    return "a JPEG scan that uses a Huffman table no DHT segment defines";
            }
        }
        at = end;
    }
    return "";
}

// What makes a PNG file unsafe for stb_image 2.27, or "" (also for any other format): it allocates
// the length an IDAT chunk claims (doubled) before reading the chunk, so 12 bytes claiming 2^31
// cost 4 GB. Every chunk up to IEND must fit in the file.
inline std::string png_chunk_problem(const std::vector<uint8_t>& file) {
    if (file.size() < 8 || memcmp(file.data(), "\x89PNG\r\n\x1a\n", 8) != 0) return "";
    for (size_t at = 8; at + 8 <= file.size();) {  // a chunk: u32 length, 4-byte type, the data, u32 CRC
        const uint32_t length = big_endian_u32(&file[at]);
        if (length > file.size() - at - 8)
            return "a PNG chunk of " + std::to_string(length) + " bytes, past the end of the file";
        if (memcmp(&file[at + 4], "IEND", 4) == 0) break;
        at += 12 + (size_t)length;
    }
    return "";
}

// The bytes of an image file, once nothing in them is unsafe to decode: jpeg_huffman_problem and
// png_chunk_problem find nothing, and the header claims at most IMAGE_MAX_PIXELS (stb decodes the
// data a JPEG or BMP file lacks as zeros, so a header of a few bytes claiming 65535 x 65535 would
// cost 12 GB and minutes).
inline std::vector<uint8_t> read_image_file(const std::string& path) {
    std::vector<uint8_t> bytes = read_file_bytes(path);
    if (bytes.size() > INT_MAX) throw std::runtime_error(path + ": an image file of more than 2 GB");
    for (const std::string& problem : {jpeg_huffman_problem(bytes), png_chunk_problem(bytes)})
        if (!problem.empty()) throw std::runtime_error(path + ": cannot decode the image (" + problem + ")");
    int width = 0, height = 0, channels = 0;
    if (!stbi_info_from_memory(bytes.data(), (int)bytes.size(), &width, &height, &channels)) return bytes;
    const int64_t rows = std::abs((int64_t)height), cols = std::abs((int64_t)width);  // a top-down BMP: height < 0
    if (rows * cols > IMAGE_MAX_PIXELS)
        throw std::runtime_error(path + ": " + std::to_string(rows) + "x" + std::to_string(cols) +
                                 " pixels, more than the " + std::to_string(IMAGE_MAX_PIXELS) +
                                 " an image may have (shrink such images before training on them)");
    return bytes;
}

// Why stb_image could not decode a file, as one printable line: stb quotes the name of an unknown
// PNG chunk straight from the file, and those four bytes can be anything, a newline included.
inline std::string decode_failure() {
    std::string reason = stbi_failure_reason();
    for (char& c : reason)
        if (!std::isprint((unsigned char)c)) c = '?';
    return "cannot decode the image (" + reason + ")";
}

// Decodes one file and appends it to set, channel-first, in set's channels and size (resized to
// them when resize > 0); first_path is the image that fixed that size, for the error message.
inline void append_image(const std::string& path, ImageSet& set, int resize, const std::string& first_path) {
    int width = 0, height = 0, channels_in_file = 0;
    const std::vector<uint8_t> file = read_image_file(path);
    uint8_t* hwc = stbi_load_from_memory(file.data(), (int)file.size(), &width, &height, &channels_in_file,
                                         set.channels);  // (h, w, channels)
    if (!hwc) throw std::runtime_error(path + ": " + decode_failure());
    if (height < 1 || width < 1) {  // stb decodes a BMP of height 0
        stbi_image_free(hwc);
        throw std::runtime_error(path + ": an image of " + std::to_string(height) + "x" + std::to_string(width) +
                                 " pixels (height x width)");
    }
    if (resize == 0 && (height != set.height || width != set.width)) {
        stbi_image_free(hwc);
        throw std::runtime_error(path + ": " + std::to_string(height) + "x" + std::to_string(width) +
                                 " pixels (height x width), but the first image " + first_path + " is " +
                                 std::to_string(set.height) + "x" + std::to_string(set.width) +
                                 " (a resize makes them all one size)");
    }
    const size_t at = set.pixels.size(), plane = (size_t)height * width;
    set.pixels.resize(at + set.image_bytes());
    const bool same_size = height == set.height && width == set.width;
    std::vector<uint8_t> unresized(same_size ? 0 : plane * set.channels);   // (channels, height, width) to resize
    uint8_t* chw = same_size ? set.pixels.data() + at : unresized.data();  // (channels, height, width)
    for (int c = 0; c < set.channels; c++)
        for (size_t p = 0; p < plane; p++) chw[c * plane + p] = hwc[p * set.channels + c];
    stbi_image_free(hwc);
    const size_t out_plane = (size_t)set.height * set.width;
    if (!same_size)
        for (int c = 0; c < set.channels; c++)
            resize_bilinear(chw + c * plane, height, width, set.pixels.data() + at + c * out_plane, set.height,
                            set.width);
}

// Every image of dir/split/<class>/, classes in the given order, labelled by their index.
inline ImageSet read_image_split(const std::string& dir, const std::string& split,
                                 const std::vector<std::string>& classes, int channels, int height, int width,
                                 int resize, const std::string& first_path) {
    std::vector<std::string> files;  // (N)
    ImageSet set;
    for (int c = 0; c < (int)classes.size(); c++) {
        std::vector<std::string> class_files = sorted_image_files(dir + "/" + split + "/" + classes[c]);
        files.insert(files.end(), class_files.begin(), class_files.end());
        set.labels.insert(set.labels.end(), class_files.size(), c);
    }
    set.channels = channels;
    set.height = height;
    set.width = width;
    for (size_t i = 0; i < files.size(); i++) {
        append_image(files[i], set, resize, first_path);
        // only now: the size came from the first image's header, which a file of a few bytes can
        // make claim 65535 x 65535 pixels; decoded, it has shown that it holds them
        if (i == 0) set.pixels.reserve(files.size() * set.image_bytes());
    }
    return set;
}

// The image folder data set at dir (layout above); resize > 0 resizes every image to resize x resize.
inline ImageData load_image_folder(const std::string& dir, int resize = 0) {
    if (resize < 0)
        throw std::runtime_error(dir + ": the resize must be 0 (none) or positive, not " + std::to_string(resize));
    const std::string train_dir = dir + "/train", test_dir = dir + "/test";
    ImageData data;
    data.class_names = sorted_subfolders(train_dir);
    if (data.class_names.empty()) throw std::runtime_error(train_dir + ": no class folders");
    const std::vector<std::string> test_classes = sorted_subfolders(test_dir);
    for (const std::string& name : data.class_names)
        if (!std::binary_search(test_classes.begin(), test_classes.end(), name))
            throw std::runtime_error(test_dir + ": no class folder " + name + ", which " + train_dir + " has");
    for (const std::string& name : test_classes)
        if (!std::binary_search(data.class_names.begin(), data.class_names.end(), name))
            throw std::runtime_error(test_dir + "/" + name + ": a class folder that " + train_dir + " lacks");
    data.classes = (int)data.class_names.size();

    // the first image fixes the channels, and the size unless resize does
    const std::string first = sorted_image_files(train_dir + "/" + data.class_names[0])[0];
    int width = 0, height = 0, channels_in_file = 0;
    const std::vector<uint8_t> first_file = read_image_file(first);
    if (!stbi_info_from_memory(first_file.data(), (int)first_file.size(), &width, &height, &channels_in_file))
        throw std::runtime_error(first + ": " + decode_failure());
    height = std::abs(height);  // stb_image 2.27 gives a top-down BMP's height (stored negative) as it is stored
    const int channels = channels_in_file <= 2 ? 1 : 3;
    if (resize > 0) height = width = resize;
    data.train = read_image_split(dir, "train", data.class_names, channels, height, width, resize, first);
    data.test = read_image_split(dir, "test", data.class_names, channels, height, width, resize, first);
    data.source = "image folder " + dir + ": " + image_data_counts(data) +
                  (resize > 0 ? ", resized to " + std::to_string(resize) + "x" + std::to_string(resize) : "");
    return data;
}
