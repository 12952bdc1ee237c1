// tasks/image_files.h: image data sets read from their official binary files into memory (host
// only, no CUDA): MNIST and Fashion-MNIST (IDX files), CIFAR-10 and CIFAR-100 (the binary
// versions). Every loader returns an ImageData: a train and a test ImageSet of uint8 pixels,
// channel-first, with integer labels. The whole data set is held in memory (CIFAR-10's train
// pixels are 150 MB); each file is read with one big read.
//
// IDX (MNIST, Fashion-MNIST), one folder holding four files, each raw or gzip-compressed
// (a name with ".gz" appended; the raw file is used when both exist):
//   train-images-idx3-ubyte, train-labels-idx1-ubyte   the training split (60000 images of 28x28)
//   t10k-images-idx3-ubyte,  t10k-labels-idx1-ubyte    the test split (10000 images of 28x28)
//   images: u32 magic 0x00000803, u32 count, u32 rows, u32 cols, then count*rows*cols pixel bytes
//           (image after image, each row-major, 0 = background); rows and cols 1..65535
//   labels: u32 magic 0x00000801, u32 count, then count label bytes, 0..9
//   every u32 big-endian; a file holds exactly what its header promises, no more.
//
// CIFAR-10 binary (cifar-10-batches-bin/): data_batch_1.bin .. data_batch_5.bin (train, in that
// order), test_batch.bin; 10000 records of 3073 bytes per file:
//   [label 0..9] [1024 red] [1024 green] [1024 blue]     each plane 32x32, row-major
// class names: batches.meta.txt, one a line (blank lines ignored).
// CIFAR-100 binary (cifar-100-binary/): train.bin (50000 records), test.bin (10000); 3074 bytes:
//   [coarse label 0..19] [fine label 0..99] [1024 red] [1024 green] [1024 blue]
// class names: fine_label_names.txt, coarse_label_names.txt, one a line.
// A CIFAR record's pixels are already channel-first, so they are copied as they are.
//
// Every error is one line, thrown as std::runtime_error, starting with the file's path.
#pragma once
#include <zlib.h>  // gzopen, gzread: the .gz IDX files
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

// One split of an image data set in memory: every image the same shape, pixels channel-first.
struct ImageSet {
    int channels = 0, height = 0, width = 0;
    std::vector<uint8_t> pixels;  // (N, channels, height, width), 0..255
    std::vector<int> labels;      // (N), 0 .. classes-1
    int size() const { return (int)labels.size(); }
    size_t image_bytes() const { return (size_t)channels * height * width; }
    const uint8_t* image(int i) const { return pixels.data() + (size_t)i * image_bytes(); }
};
struct ImageData {
    ImageSet train, test;
    int classes = 0;
    std::vector<std::string> class_names;  // (classes)
    std::string source;                    // one line for the startup table: format, folder, counts
};

// "train 50000, test 10000 images of 3x32x32, 10 classes": the counts part of ImageData::source
inline std::string image_data_counts(const ImageData& data) {
    const ImageSet& s = data.train;
    return "train " + std::to_string(s.size()) + ", test " + std::to_string(data.test.size()) + " images of " +
           std::to_string(s.channels) + "x" + std::to_string(s.height) + "x" + std::to_string(s.width) + ", " +
           std::to_string(data.classes) + " classes";
}

inline bool regular_file_exists(const std::string& path) { return std::filesystem::is_regular_file(path); }

// The whole file, read with one fread.
inline std::vector<uint8_t> read_file_bytes(const std::string& path) {
    FILE* f = fopen(path.c_str(), "rb");
    if (!f) throw std::runtime_error(path + ": cannot open (" + strerror(errno) + ")");
    std::vector<uint8_t> bytes;  // (file size)
    bool read_ok = fseek(f, 0, SEEK_END) == 0;
    long size = read_ok ? ftell(f) : -1;
    read_ok = size >= 0 && fseek(f, 0, SEEK_SET) == 0;
    if (read_ok) {
        bytes.resize((size_t)size);
        read_ok = fread(bytes.data(), 1, bytes.size(), f) == bytes.size();
    }
    fclose(f);
    if (!read_ok) throw std::runtime_error(path + ": read error");
    return bytes;
}

// The uncompressed contents of a gzip file (zlib); a corrupt or cut-off stream is an error.
inline std::vector<uint8_t> read_gzip_bytes(const std::string& path) {
    gzFile f = gzopen(path.c_str(), "rb");
    if (!f) throw std::runtime_error(path + ": cannot open (" + strerror(errno) + ")");
    gzbuffer(f, 1 << 20);
    std::vector<uint8_t> bytes;  // (uncompressed size)
    const size_t chunk = 16 << 20;
    int got = 0;
    do {
        size_t filled = bytes.size();
        bytes.resize(filled + chunk);
        got = gzread(f, bytes.data() + filled, (unsigned)chunk);
        bytes.resize(filled + (got > 0 ? got : 0));
    } while (got == (int)chunk);
    int code = Z_OK;
    std::string why = gzerror(f, &code);  // "<path>: <reason>"
    gzclose(f);
    if (why.rfind(path + ": ", 0) == 0) why = why.substr(path.size() + 2);
    // a stream that ends early reads as end of file with Z_BUF_ERROR ("unexpected end of file")
    if (got < 0 || code != Z_OK) throw std::runtime_error(path + ": corrupt gzip stream (" + why + ")");
    return bytes;
}

// --- IDX ---------------------------------------------------------------------------------------

constexpr uint32_t IDX_IMAGES_MAGIC = 0x00000803, IDX_LABELS_MAGIC = 0x00000801;
constexpr int IDX_CLASSES = 10;
constexpr uint32_t IDX_MAX_SIDE = 65535;  // rows and cols lie in 1 .. this

// One IDX file's bytes and the path they came from (the .gz name when it was compressed).
struct IdxBytes {
    std::string path;
    bool gzipped = false;
    std::vector<uint8_t> bytes;  // (file size), uncompressed
};

// dir/name, or dir/name.gz where only that exists
inline IdxBytes read_idx_bytes(const std::string& dir, const std::string& name) {
    const std::string raw = dir + "/" + name, gz = raw + ".gz";
    if (regular_file_exists(raw)) return {raw, false, read_file_bytes(raw)};
    if (regular_file_exists(gz)) return {gz, true, read_gzip_bytes(gz)};
    throw std::runtime_error(raw + ": no such file (nor " + name + ".gz)");
}

inline uint32_t big_endian_u32(const uint8_t* p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

inline std::string hex_u32(uint32_t v) {
    char text[16];
    snprintf(text, sizeof text, "0x%08X", v);
    return text;
}

// Checks the header (magic, then `dims` u32 sizes) and that exactly the promised payload
// follows; returns the sizes. `kind` ("images", "labels") names the payload in the messages.
inline std::vector<uint32_t> idx_header(const IdxBytes& file, uint32_t magic, int dims, const std::string& kind) {
    const size_t header = 4 + 4 * (size_t)dims;
    const std::string size_text = std::to_string(file.bytes.size()) + " bytes" + (file.gzipped ? " uncompressed" : "");
    if (file.bytes.size() < header)
        throw std::runtime_error(file.path + ": " + size_text + ", shorter than the " + std::to_string(header) +
                                 "-byte header of an IDX " + kind + " file");
    uint32_t found = big_endian_u32(file.bytes.data());
    if (found != magic)
        throw std::runtime_error(file.path + ": magic number " + hex_u32(found) + ", but an IDX " + kind +
                                 " file starts with " + hex_u32(magic));
    std::vector<uint32_t> sizes;  // (dims): count, then rows and cols for images
    for (int d = 0; d < dims; d++) sizes.push_back(big_endian_u32(file.bytes.data() + 4 + 4 * d));
    // sides of 1 .. 65535: each one an int, and count x rows x cols below 2^64, so never wrapped
    // round to the payload of a file that holds no pixels
    if (dims == 3 && (sizes[1] < 1 || sizes[2] < 1 || sizes[1] > IDX_MAX_SIDE || sizes[2] > IDX_MAX_SIDE))
        throw std::runtime_error(file.path + ": the header promises " + kind + " of " + std::to_string(sizes[1]) +
                                 "x" + std::to_string(sizes[2]) + ", but each side must lie in 1.." +
                                 std::to_string(IDX_MAX_SIDE));
    uint64_t payload = 1;
    for (uint32_t size : sizes) payload *= size;
    const uint64_t body = file.bytes.size() - header;
    if (body != payload) {
        std::string promise = std::to_string(sizes[0]) + " " + kind;
        if (dims == 3) promise += " of " + std::to_string(sizes[1]) + "x" + std::to_string(sizes[2]);
        throw std::runtime_error(file.path + ": " + size_text + ", but the header promises " + promise + " = " +
                                 std::to_string(payload) + " bytes after a " + std::to_string(header) +
                                 "-byte header" + (body > payload ? " (trailing bytes)" : " (truncated)"));
    }
    return sizes;
}

// One split from its image file and label file (names without ".gz").
inline ImageSet read_idx_split(const std::string& dir, const std::string& images_name,
                               const std::string& labels_name) {
    const IdxBytes images = read_idx_bytes(dir, images_name), labels = read_idx_bytes(dir, labels_name);
    std::vector<uint32_t> image_sizes = idx_header(images, IDX_IMAGES_MAGIC, 3, "images");
    std::vector<uint32_t> label_sizes = idx_header(labels, IDX_LABELS_MAGIC, 1, "labels");
    if (label_sizes[0] != image_sizes[0])
        throw std::runtime_error(labels.path + ": " + std::to_string(label_sizes[0]) + " labels, but " +
                                 images.path + " holds " + std::to_string(image_sizes[0]) + " images");
    ImageSet set;
    set.channels = 1;
    set.height = (int)image_sizes[1];
    set.width = (int)image_sizes[2];
    set.pixels.assign(images.bytes.begin() + 16, images.bytes.end());  // after the 16-byte header
    set.labels.assign(labels.bytes.begin() + 8, labels.bytes.end());   // after the 8-byte header
    for (int i = 0; i < set.size(); i++)
        if (set.labels[i] >= IDX_CLASSES)
            throw std::runtime_error(labels.path + ": label " + std::to_string(set.labels[i]) + " of image " +
                                     std::to_string(i) + " is outside 0.." + std::to_string(IDX_CLASSES - 1));
    return set;
}

// MNIST or Fashion-MNIST from the folder of its four IDX files. The two share file names and
// formats, so `fashion` says which it is: it only chooses the class names.
inline ImageData load_idx_folder(const std::string& dir, bool fashion = false) {
    ImageData data;
    data.train = read_idx_split(dir, "train-images-idx3-ubyte", "train-labels-idx1-ubyte");
    data.test = read_idx_split(dir, "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte");
    if (data.test.height != data.train.height || data.test.width != data.train.width)
        throw std::runtime_error(dir + "/t10k-images-idx3-ubyte: images of " + std::to_string(data.test.height) +
                                 "x" + std::to_string(data.test.width) + ", but the training images are " +
                                 std::to_string(data.train.height) + "x" + std::to_string(data.train.width));
    data.classes = IDX_CLASSES;
    if (fashion)
        data.class_names = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                            "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
    else
        for (int c = 0; c < IDX_CLASSES; c++) data.class_names.push_back(std::to_string(c));
    data.source = std::string(fashion ? "Fashion-MNIST" : "MNIST") + " (IDX) " + dir + ": " + image_data_counts(data);
    return data;
}

// --- CIFAR --------------------------------------------------------------------------------------

constexpr int CIFAR_SIDE = 32, CIFAR_CHANNELS = 3;
constexpr int CIFAR_IMAGE_BYTES = CIFAR_CHANNELS * CIFAR_SIDE * CIFAR_SIDE;  // 3072
// CIFAR-10's class names, as batches.meta.txt lists them
constexpr const char* CIFAR10_NAMES[10] = {"airplane", "automobile", "bird",  "cat",  "deer",
                                           "dog",      "frog",       "horse", "ship", "truck"};

// A record's shape and which of its labels is kept.
struct CifarFormat {
    int label_bytes = 1;   // 1 (CIFAR-10: the label) or 2 (CIFAR-100: coarse, then fine)
    int label_offset = 0;  // the kept label's byte in the record
    int classes = 10;      // the kept labels lie in 0 .. classes-1
    int record_bytes() const { return label_bytes + CIFAR_IMAGE_BYTES; }
};

// CIFAR-10 (classes 10) or CIFAR-100 (classes 100) with its fine labels, or its 20 coarse ones
inline CifarFormat cifar_format(int classes, bool coarse) {
    if (classes == 10 && !coarse) return {1, 0, 10};
    if (classes == 100) return coarse ? CifarFormat{2, 0, 20} : CifarFormat{2, 1, 100};
    throw std::runtime_error("CIFAR: classes must be 10 or 100 (coarse labels only with 100), not " +
                             std::to_string(classes) + (coarse ? " coarse" : ""));
}

// Records per file of the official release: CIFAR-10 has 5 train files of 10000 and a test file
// of 10000; CIFAR-100 one train file of 50000 and a test file of 10000. Any other count is an error.
struct CifarRecords {
    int per_train_file = 0, test = 0;
};
inline CifarRecords cifar_official_records(int classes) { return classes == 10 ? CifarRecords{10000, 10000}
                                                                               : CifarRecords{50000, 10000}; }

// Appends the records of one CIFAR binary file to `into`; the file must hold exactly
// records_expected whole records, each label below format.classes.
inline void read_cifar_file(const std::string& path, int records_expected, const CifarFormat& format,
                            ImageSet& into) {
    if (!regular_file_exists(path)) throw std::runtime_error(path + ": no such file");
    const std::vector<uint8_t> bytes = read_file_bytes(path);  // (records, record_bytes)
    const size_t record = format.record_bytes();
    if (bytes.size() % record != 0)
        throw std::runtime_error(path + ": " + std::to_string(bytes.size()) + " bytes, not a whole number of " +
                                 std::to_string(record) + "-byte records (truncated?)");
    const size_t records = bytes.size() / record;
    if (records != (size_t)records_expected)
        throw std::runtime_error(path + ": " + std::to_string(records) + " records, but the official file has " +
                                 std::to_string(records_expected));
    into.channels = CIFAR_CHANNELS;
    into.height = into.width = CIFAR_SIDE;
    const size_t first = into.labels.size();
    into.labels.resize(first + records);
    into.pixels.resize((first + records) * CIFAR_IMAGE_BYTES);
    for (size_t r = 0; r < records; r++) {
        const uint8_t* rec = bytes.data() + r * record;
        int label = rec[format.label_offset];
        if (label >= format.classes)
            throw std::runtime_error(path + ": record " + std::to_string(r) + " has label " + std::to_string(label) +
                                     ", outside 0.." + std::to_string(format.classes - 1));
        into.labels[first + r] = label;
        memcpy(into.pixels.data() + (first + r) * CIFAR_IMAGE_BYTES, rec + format.label_bytes, CIFAR_IMAGE_BYTES);
    }
}

// Class names from a file, one a line (blank lines and surrounding spaces ignored), or the
// fallback names (classes of them) without the file.
inline std::vector<std::string> read_class_names(const std::string& path, int classes,
                                                 const std::vector<std::string>& fallback) {
    if (!regular_file_exists(path)) return fallback;
    std::vector<std::string> names;  // (classes)
    std::ifstream in(path);
    const char* space = " \t\r\n\f\v";
    for (std::string line; std::getline(in, line);) {
        size_t start = line.find_first_not_of(space);
        if (start != std::string::npos) names.push_back(line.substr(start, line.find_last_not_of(space) - start + 1));
    }
    if ((int)names.size() != classes)
        throw std::runtime_error(path + ": " + std::to_string(names.size()) + " class names, but there are " +
                                 std::to_string(classes) + " classes");
    return names;
}

// CIFAR-10 or CIFAR-100 with the given records per file (the tests' small files); the public
// load_cifar_binary below asks for the official counts.
inline ImageData load_cifar_binary(const std::string& dir, int classes, bool coarse, const CifarRecords& records) {
    const CifarFormat format = cifar_format(classes, coarse);
    const std::string folder_name = classes == 10 ? "cifar-10-batches-bin" : "cifar-100-binary";
    const std::string test_name = classes == 10 ? "test_batch.bin" : "test.bin";
    std::vector<std::string> train_names = {"train.bin"};
    if (classes == 10) train_names = {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
                                      "data_batch_4.bin", "data_batch_5.bin"};
    // dir is the folder of the files, or the folder above it
    std::string folder = dir;
    if (!regular_file_exists(dir + "/" + test_name) && std::filesystem::is_directory(dir + "/" + folder_name))
        folder = dir + "/" + folder_name;
    if (!regular_file_exists(folder + "/" + test_name) && !regular_file_exists(folder + "/" + train_names[0]))
        throw std::runtime_error(dir + ": no " + test_name + " here nor in " + dir + "/" + folder_name +
                                 " (sh data/get_cifar.sh " + std::to_string(classes) + " downloads it)");

    ImageData data;
    data.train.pixels.reserve((size_t)records.per_train_file * train_names.size() * CIFAR_IMAGE_BYTES);
    for (const std::string& name : train_names)
        read_cifar_file(folder + "/" + name, records.per_train_file, format, data.train);
    read_cifar_file(folder + "/" + test_name, records.test, format, data.test);
    data.classes = format.classes;
    const std::string names_file = classes == 10 ? "batches.meta.txt"
                                                 : coarse ? "coarse_label_names.txt" : "fine_label_names.txt";
    std::vector<std::string> fallback;  // (classes): CIFAR-10's standard names, CIFAR-100's numbers
    for (int c = 0; c < format.classes; c++) fallback.push_back(classes == 10 ? CIFAR10_NAMES[c] : std::to_string(c));
    data.class_names = read_class_names(folder + "/" + names_file, format.classes, fallback);
    data.source = std::string(classes == 10 ? "CIFAR-10" : coarse ? "CIFAR-100 coarse" : "CIFAR-100") +
                  " (binary) " + folder + ": " + image_data_counts(data);
    return data;
}

// CIFAR-10 (classes 10) or CIFAR-100 (classes 100; its 20 coarse labels when `coarse`) from the
// folder of the official binary files, or from its parent.
inline ImageData load_cifar_binary(const std::string& dir, int classes, bool coarse = false) {
    return load_cifar_binary(dir, classes, coarse, cifar_official_records(classes));
}
