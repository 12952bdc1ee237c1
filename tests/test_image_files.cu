// The image loaders (tasks/image_files.h, tasks/image_folder.h) on small files written here in
// each real format: IDX raw and gzip-compressed, CIFAR-10 and CIFAR-100 records, an image folder
// of PNG and BMP files. Every pixel and label read back is checked against the values written,
// then each kind of broken input must give its one-line error naming the file. Fashion-MNIST is
// loaded too where the Debian package dataset-fashion-mnist has installed it.
#include <doctest/doctest.h>
#include <zlib.h>  // gzopen, gzwrite: the compressed IDX files
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>
#include "run/pictures.h"  // stb_image_write (stbi_write_png, stbi_write_bmp), compiled once there
#include "tasks/image_files.h"
#include "tasks/image_folder.h"
#include "temp_dir.h"
#include "thrown.h"

using ImgtestBytes = std::vector<uint8_t>;

static void imgtest_write(const std::string& path, const ImgtestBytes& bytes) {
    std::ofstream(path, std::ios::binary).write((const char*)bytes.data(), (std::streamsize)bytes.size());
}

static void imgtest_write_gz(const std::string& path, const ImgtestBytes& bytes) {
    gzFile f = gzopen(path.c_str(), "wb");
    REQUIRE(f);
    REQUIRE(gzwrite(f, bytes.data(), (unsigned)bytes.size()) == (int)bytes.size());
    REQUIRE(gzclose(f) == Z_OK);
}

// f must throw one line of std::runtime_error that starts with `path` and holds every word
static void imgtest_check_error(const std::function<void()>& f, const std::string& path,
                                const std::vector<std::string>& words) {
    const std::string error = message_of<std::runtime_error>(f);
    INFO("the error: " << error);
    CHECK(error.rfind(path, 0) == 0);
    CHECK(error.find('\n') == std::string::npos);
    for (const std::string& word : words) CHECK_MESSAGE(error.find(word) != std::string::npos, word);
}

// --- IDX -----------------------------------------------------------------------------------------

// An IDX file: the magic, the sizes, then the payload, every u32 big-endian.
static ImgtestBytes imgtest_idx(uint32_t magic, const std::vector<uint32_t>& sizes, const ImgtestBytes& payload) {
    ImgtestBytes bytes;
    auto put = [&](uint32_t v) {
        for (int shift = 24; shift >= 0; shift -= 8) bytes.push_back((uint8_t)(v >> shift));
    };
    put(magic);
    for (uint32_t s : sizes) put(s);
    bytes.insert(bytes.end(), payload.begin(), payload.end());
    return bytes;
}

// pixel (y, x) of image i, 2 rows x 3 columns: distinct values
static uint8_t imgtest_idx_pixel(int i, int y, int x) { return (uint8_t)(100 * i + 10 * y + x + 1); }

static ImgtestBytes imgtest_idx_images(int count) {
    ImgtestBytes pixels;  // (count, 2, 3)
    for (int i = 0; i < count; i++)
        for (int y = 0; y < 2; y++)
            for (int x = 0; x < 3; x++) pixels.push_back(imgtest_idx_pixel(i, y, x));
    return imgtest_idx(IDX_IMAGES_MAGIC, {(uint32_t)count, 2, 3}, pixels);
}

// train: 3 images, raw; test: 2 images, gzip-compressed
static void imgtest_write_idx_folder(const std::string& dir) {
    imgtest_write(dir + "/train-images-idx3-ubyte", imgtest_idx_images(3));
    imgtest_write(dir + "/train-labels-idx1-ubyte", imgtest_idx(IDX_LABELS_MAGIC, {3}, {7, 0, 9}));
    imgtest_write_gz(dir + "/t10k-images-idx3-ubyte.gz", imgtest_idx_images(2));
    imgtest_write_gz(dir + "/t10k-labels-idx1-ubyte.gz", imgtest_idx(IDX_LABELS_MAGIC, {2}, {4, 1}));
}

TEST_CASE("load_idx_folder reads raw and gzip-compressed IDX files, pixel by pixel") {
    TempDir dir;
    imgtest_write_idx_folder(dir.path);
    ImageData data = load_idx_folder(dir.path, true);
    CHECK(data.classes == 10);
    CHECK(data.class_names[0] == "T-shirt/top");
    CHECK(data.class_names[9] == "Ankle boot");
    CHECK(data.source.find("train 3, test 2 images of 1x2x3") != std::string::npos);
    for (const ImageSet* set : {&data.train, &data.test}) {
        CHECK(set->channels == 1);
        CHECK(set->height == 2);
        CHECK(set->width == 3);
        CHECK(set->pixels.size() == set->labels.size() * 6);
        for (int i = 0; i < set->size(); i++)
            for (int y = 0; y < 2; y++)
                for (int x = 0; x < 3; x++) CHECK(set->image(i)[y * 3 + x] == imgtest_idx_pixel(i, y, x));
    }
    CHECK(data.train.labels == std::vector<int>{7, 0, 9});
    CHECK(data.test.labels == std::vector<int>{4, 1});
    CHECK(data.train.image(2)[5] == 213);  // image 2, row 1, column 2: the file's last byte
    CHECK(load_idx_folder(dir.path).class_names[3] == "3");  // MNIST's names are the digits
}

TEST_CASE("load_idx_folder gives one line naming the file for each broken IDX file") {
    TempDir dir;
    imgtest_write_idx_folder(dir.path);
    const std::string images = dir.path + "/train-images-idx3-ubyte", labels = dir.path + "/train-labels-idx1-ubyte";
    auto load = [&] { load_idx_folder(dir.path); };

    imgtest_write(images, imgtest_idx(IDX_LABELS_MAGIC, {3, 2, 3}, ImgtestBytes(18, 0)));
    imgtest_check_error(load, images, {"magic number 0x00000801", "0x00000803"});
    ImgtestBytes cut = imgtest_idx_images(3);
    cut.pop_back();
    imgtest_write(images, cut);
    imgtest_check_error(load, images, {"33 bytes", "promises 3 images of 2x3 = 18 bytes after a 16-byte", "truncated"});
    imgtest_write(images, ImgtestBytes(9, 0));
    imgtest_check_error(load, images, {"9 bytes", "shorter than the 16-byte header"});
    ImgtestBytes longer = imgtest_idx_images(3);
    longer.push_back(0);
    imgtest_write(images, longer);
    imgtest_check_error(load, images, {"35 bytes", "trailing bytes"});
    imgtest_write(images, imgtest_idx_images(3));

    imgtest_write(labels, imgtest_idx(IDX_LABELS_MAGIC, {2}, {7, 0}));
    imgtest_check_error(load, labels, {"2 labels", images, "3 images"});
    imgtest_write(labels, imgtest_idx(IDX_LABELS_MAGIC, {3}, {7, 10, 9}));
    imgtest_check_error(load, labels, {"label 10 of image 1", "outside 0..9"});
    std::filesystem::remove(labels);
    imgtest_check_error(load, labels, {"no such file", "train-labels-idx1-ubyte.gz"});
    imgtest_write(labels, imgtest_idx(IDX_LABELS_MAGIC, {3}, {7, 0, 9}));
    REQUIRE(load_idx_folder(dir.path).train.size() == 3);

    // a gzip stream cut short, then one whose CRC does not match
    const std::string test_images = dir.path + "/t10k-images-idx3-ubyte.gz";
    ImgtestBytes gz = read_file_bytes(test_images);
    imgtest_write(test_images, ImgtestBytes(gz.begin(), gz.end() - 10));
    imgtest_check_error(load, test_images, {"corrupt gzip stream (unexpected end of file)"});
    ImgtestBytes flipped = gz;
    flipped[gz.size() - 8] ^= 0xFF;  // the gzip trailer: CRC-32 of the uncompressed data (4 bytes), then its size
    imgtest_write(test_images, flipped);
    imgtest_check_error(load, test_images, {"corrupt gzip stream (incorrect data check)"});
    // the uncompressed file is preferred where both exist
    imgtest_write(dir.path + "/t10k-images-idx3-ubyte", imgtest_idx_images(2));
    CHECK(load_idx_folder(dir.path).test.size() == 2);
}

TEST_CASE("load_idx_folder reads the real Fashion-MNIST where dataset-fashion-mnist is installed") {
    const std::string dir = "/usr/share/datasets/fashion-mnist";
    if (!std::filesystem::is_directory(dir)) {
        MESSAGE("skipped: " << dir << " is absent (apt-get install dataset-fashion-mnist)");
        return;
    }
    ImageData data = load_idx_folder(dir, true);
    CHECK(data.train.size() == 60000);
    CHECK(data.test.size() == 10000);
    CHECK(data.train.height == 28);
    CHECK(data.train.width == 28);
    CHECK(data.train.pixels.size() == (size_t)60000 * 28 * 28);
    CHECK(data.class_names[data.train.labels[0]] == "Ankle boot");  // the first training image: label 9
    CHECK(data.test.labels[0] == 9);
}

// --- CIFAR ---------------------------------------------------------------------------------------

// channel c (0 red, 1 green, 2 blue) of pixel (y, x) of record r: wraps, but differs between neighbours
static uint8_t imgtest_cifar_pixel(int r, int c, int y, int x) { return (uint8_t)(37 * r + 85 * c + 5 * y + x); }

// Records in the official layout: the label bytes, then 1024 red, 1024 green, 1024 blue, row-major.
static ImgtestBytes imgtest_cifar_records(const std::vector<ImgtestBytes>& labels, int first_record = 0) {
    ImgtestBytes bytes;
    for (size_t r = 0; r < labels.size(); r++) {
        bytes.insert(bytes.end(), labels[r].begin(), labels[r].end());
        for (int c = 0; c < 3; c++)
            for (int y = 0; y < 32; y++)
                for (int x = 0; x < 32; x++) bytes.push_back(imgtest_cifar_pixel(first_record + (int)r, c, y, x));
    }
    return bytes;
}

// every pixel of image i of set is that of record `record`, channel-first
static void imgtest_check_cifar_image(const ImageSet& set, int i, int record) {
    CHECK(set.channels == 3);
    CHECK(set.height == 32);
    CHECK(set.width == 32);
    int wrong = 0;
    for (int c = 0; c < 3; c++)
        for (int y = 0; y < 32; y++)
            for (int x = 0; x < 32; x++)
                wrong += set.image(i)[c * 1024 + y * 32 + x] != imgtest_cifar_pixel(record, c, y, x);
    CHECK(wrong == 0);
}

TEST_CASE("read_cifar_file reads CIFAR-10 and CIFAR-100 records channel-first, with the chosen label") {
    TempDir dir;
    const std::string ten = dir.path + "/ten.bin", hundred = dir.path + "/hundred.bin";
    imgtest_write(ten, imgtest_cifar_records({{3}, {9}, {0}}));
    ImageSet set;
    read_cifar_file(ten, 3, cifar_format(10, false), set);
    CHECK(set.labels == std::vector<int>{3, 9, 0});
    for (int i = 0; i < 3; i++) imgtest_check_cifar_image(set, i, i);
    // by hand: record 1's red (0, 1) is its byte 1 + 1, its green (0, 0) byte 1 + 1024, its blue (1, 0) byte 1 + 2080
    const ImgtestBytes file = read_file_bytes(ten);
    CHECK(set.image(1)[1] == file[3073 + 1 + 1]);
    CHECK(set.image(1)[1024] == file[3073 + 1 + 1024]);
    CHECK(set.image(1)[2048 + 32] == file[3073 + 1 + 2048 + 32]);
    CHECK(set.image(1)[2048 + 32] == (uint8_t)(37 + 170 + 5));

    imgtest_write(hundred, imgtest_cifar_records({{19, 99}, {0, 5}}));
    ImageSet fine, coarse;
    read_cifar_file(hundred, 2, cifar_format(100, false), fine);
    read_cifar_file(hundred, 2, cifar_format(100, true), coarse);
    CHECK(fine.labels == std::vector<int>{99, 5});
    CHECK(coarse.labels == std::vector<int>{19, 0});
    imgtest_check_cifar_image(fine, 1, 1);
    imgtest_check_cifar_image(coarse, 1, 1);
}

TEST_CASE("read_cifar_file gives one line naming the file for each broken CIFAR file") {
    TempDir dir;
    const std::string path = dir.path + "/data_batch_1.bin";
    ImageSet set;
    const CifarFormat ten = cifar_format(10, false);
    ImgtestBytes records = imgtest_cifar_records({{1}, {2}, {3}});
    imgtest_write(path, ImgtestBytes(records.begin(), records.end() - 1));
    imgtest_check_error([&] { read_cifar_file(path, 3, ten, set); }, path,
                        {"9218 bytes, not a whole number of 3073-byte records", "truncated"});
    imgtest_write(path, records);
    imgtest_check_error([&] { read_cifar_file(path, 4, ten, set); }, path, {"3 records", "official file has 4"});
    imgtest_write(path, imgtest_cifar_records({{1}, {10}}));
    imgtest_check_error([&] { read_cifar_file(path, 2, ten, set); }, path, {"record 1 has label 10", "0..9"});
    imgtest_write(path, imgtest_cifar_records({{19, 100}}));
    imgtest_check_error([&] { read_cifar_file(path, 1, cifar_format(100, false), set); }, path, {"label 100", "0..99"});
    imgtest_write(path, imgtest_cifar_records({{20, 99}}));
    imgtest_check_error([&] { read_cifar_file(path, 1, cifar_format(100, true), set); }, path, {"label 20", "0..19"});
    imgtest_check_error([&] { read_cifar_file(path + "x", 1, ten, set); }, path + "x", {"no such file"});
    CHECK(message_of<std::runtime_error>([] { cifar_format(10, true); }).find("coarse") != std::string::npos);
}

TEST_CASE("load_cifar_binary reads a CIFAR-10 folder and a CIFAR-100 folder, from the folder or its parent") {
    TempDir dir;
    const std::string ten = dir.path + "/cifar-10-batches-bin", hundred = dir.path + "/cifar-100-binary";
    std::filesystem::create_directory(ten);
    std::filesystem::create_directory(hundred);
    for (int b = 1; b <= 5; b++)  // two records per batch: record numbers 0..9 in batch order
        imgtest_write(ten + "/data_batch_" + std::to_string(b) + ".bin",
                      imgtest_cifar_records({{(uint8_t)b}, {(uint8_t)(b + 4)}}, 2 * (b - 1)));
    imgtest_write(ten + "/test_batch.bin", imgtest_cifar_records({{0}, {1}, {2}}, 20));
    const CifarRecords small{2, 3};
    ImageData data = load_cifar_binary(dir.path, 10, false, small);
    CHECK(data.train.size() == 10);
    CHECK(data.test.size() == 3);
    CHECK(data.train.labels == std::vector<int>{1, 5, 2, 6, 3, 7, 4, 8, 5, 9});
    for (int i = 0; i < 10; i++) imgtest_check_cifar_image(data.train, i, i);
    imgtest_check_cifar_image(data.test, 2, 22);
    CHECK(data.class_names[9] == "truck");  // the standard names without batches.meta.txt
    CHECK(data.source.find(ten) != std::string::npos);
    std::ofstream(ten + "/batches.meta.txt") << "c0\nc1\nc2\nc3\nc4\nc5\nc6\nc7\nc8\n c9 \r\n\n";  // spaces, blank line
    data = load_cifar_binary(ten, 10, false, small);
    CHECK(data.class_names[9] == "c9");
    CHECK(data.classes == 10);
    std::filesystem::remove(ten + "/data_batch_3.bin");
    imgtest_check_error([&] { load_cifar_binary(ten, 10, false, small); }, ten + "/data_batch_3.bin", {"no such file"});
    imgtest_check_error([&] { load_cifar_binary(dir.path + "/elsewhere", 10); }, dir.path + "/elsewhere",
                        {"no test_batch.bin", "get_cifar.sh 10"});
    // the official counts are asked for by default
    imgtest_write(ten + "/data_batch_3.bin", imgtest_cifar_records({{0}, {0}}));
    imgtest_check_error([&] { load_cifar_binary(ten, 10); }, ten + "/data_batch_1.bin",
                        {"2 records", "official file has 10000"});

    imgtest_write(hundred + "/train.bin", imgtest_cifar_records({{1, 11}, {2, 22}, {3, 33}}));
    imgtest_write(hundred + "/test.bin", imgtest_cifar_records({{4, 44}}, 3));
    std::string fine_names;
    for (int c = 0; c < 100; c++) fine_names += "fine" + std::to_string(c) + "\n";
    std::ofstream(hundred + "/fine_label_names.txt") << fine_names;
    data = load_cifar_binary(dir.path, 100, false, {3, 1});
    CHECK(data.classes == 100);
    CHECK(data.train.labels == std::vector<int>{11, 22, 33});
    CHECK(data.test.labels == std::vector<int>{44});
    CHECK(data.class_names[33] == "fine33");
    imgtest_check_cifar_image(data.test, 0, 3);
    data = load_cifar_binary(hundred, 100, true, {3, 1});
    CHECK(data.classes == 20);
    CHECK(data.train.labels == std::vector<int>{1, 2, 3});
    CHECK(data.class_names[19] == "19");  // no coarse_label_names.txt
    std::ofstream(hundred + "/coarse_label_names.txt") << "only\ntwo\n";
    imgtest_check_error([&] { load_cifar_binary(hundred, 100, true, {3, 1}); }, hundred + "/coarse_label_names.txt",
                        {"2 class names", "20 classes"});
}

// --- image folders -------------------------------------------------------------------------------

// channel c of pixel (y, x) of image k: distinct and below 256 for k < 6, 2x3 images
static uint8_t imgtest_rgb(int k, int y, int x, int c) { return (uint8_t)(40 * k + 9 * y + 3 * x + c); }

// RGB image k of 2x3 in stb's layout (2, 3, 3): imgtest_rgb's values
static ImgtestBytes imgtest_rgb_image(int k) {
    ImgtestBytes hwc;
    for (int y = 0; y < 2; y++)
        for (int x = 0; x < 3; x++)
            for (int c = 0; c < 3; c++) hwc.push_back(imgtest_rgb(k, y, x, c));
    return hwc;
}

static void imgtest_png(const std::string& path, const ImgtestBytes& hwc, int h, int w, int channels) {
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    REQUIRE(stbi_write_png(path.c_str(), w, h, channels, hwc.data(), w * channels));
}

// train/cat: a.png (image 0), b.BMP (1); train/dog: c.png (2), d.png (3) and notes.txt;
// test/cat: x.png (4); test/dog: y.png (5). All 2x3 RGB. A hidden folder train/.cache, skipped.
static void imgtest_write_image_folder(const std::string& dir) {
    imgtest_png(dir + "/train/cat/a.png", imgtest_rgb_image(0), 2, 3, 3);
    REQUIRE(stbi_write_bmp((dir + "/train/cat/b.BMP").c_str(), 3, 2, 3, imgtest_rgb_image(1).data()));
    imgtest_png(dir + "/train/dog/d.png", imgtest_rgb_image(3), 2, 3, 3);
    imgtest_png(dir + "/train/dog/c.png", imgtest_rgb_image(2), 2, 3, 3);
    std::ofstream(dir + "/train/dog/notes.txt") << "not an image";
    std::filesystem::create_directories(dir + "/train/.cache");
    imgtest_png(dir + "/test/cat/x.png", imgtest_rgb_image(4), 2, 3, 3);
    imgtest_png(dir + "/test/dog/y.png", imgtest_rgb_image(5), 2, 3, 3);
}

TEST_CASE("load_image_folder reads classes in name order, files in name order, pixels channel-first") {
    TempDir dir;
    imgtest_write_image_folder(dir.path);
    ImageData data = load_image_folder(dir.path);
    CHECK(data.classes == 2);
    CHECK(data.class_names == std::vector<std::string>{"cat", "dog"});
    CHECK(data.train.labels == std::vector<int>{0, 0, 1, 1});
    CHECK(data.test.labels == std::vector<int>{0, 1});
    CHECK(data.source.find("train 4, test 2 images of 3x2x3, 2 classes") != std::string::npos);
    for (const ImageSet* set : {&data.train, &data.test}) {
        CHECK(set->channels == 3);
        CHECK(set->height == 2);
        CHECK(set->width == 3);
        const int first = set == &data.train ? 0 : 4;
        for (int i = 0; i < set->size(); i++)
            for (int c = 0; c < 3; c++)
                for (int y = 0; y < 2; y++)
                    for (int x = 0; x < 3; x++)
                        CHECK(set->image(i)[c * 6 + y * 3 + x] == imgtest_rgb(first + i, y, x, c));
    }
    // by hand: train image 2 is c.png (d.png was written first); its green plane starts at byte 6
    CHECK(data.train.image(2)[6] == 81);                  // green of pixel (0, 0): 40 * 2 + 1
    CHECK(data.train.image(2)[12 + 5] == 80 + 9 + 6 + 2);  // blue of pixel (1, 2)
}

TEST_CASE("load_image_folder takes the first image's channels: a greyscale folder stays one channel") {
    TempDir dir;
    imgtest_png(dir.path + "/train/a/1.png", {10, 20, 30, 40}, 2, 2, 1);
    imgtest_png(dir.path + "/train/b/1.png", ImgtestBytes{255, 0, 0, 0, 255, 0, 0, 0, 255, 255, 255, 255}, 2, 2, 3);
    imgtest_png(dir.path + "/test/a/1.png", {1, 2, 3, 4}, 2, 2, 1);
    imgtest_png(dir.path + "/test/b/1.png", {5, 6, 7, 8}, 2, 2, 1);
    ImageData data = load_image_folder(dir.path);
    CHECK(data.train.channels == 1);
    CHECK(std::vector<uint8_t>(data.train.image(0), data.train.image(0) + 4) == std::vector<uint8_t>{10, 20, 30, 40});
    // the RGB image made grey by stb's luminance, (77 r + 150 g + 29 b) >> 8
    CHECK(std::vector<uint8_t>(data.train.image(1), data.train.image(1) + 4) == std::vector<uint8_t>{76, 149, 28, 255});
    CHECK(data.test.image(1)[3] == 8);
}

TEST_CASE("resize_bilinear: pixel centres aligned, edges clamped") {
    const uint8_t in[4 * 4] = {0, 2, 4, 6, 10, 12, 14, 16, 20, 22, 24, 26, 30, 32, 34, 36};  // (4, 4): 10 y + 2 x
    uint8_t half[2 * 2];
    resize_bilinear(in, 4, 4, half, 2, 2);  // each output pixel: the mean of a 2x2 block
    CHECK(std::vector<uint8_t>(half, half + 4) == std::vector<uint8_t>{6, 10, 26, 30});
    const uint8_t small[2 * 2] = {0, 40, 80, 120};
    uint8_t twice[4 * 4];
    resize_bilinear(small, 2, 2, twice, 4, 4);  // samples at -0.25 (clamped to 0), 0.25, 0.75, 1.25 (clamped to 1)
    CHECK(std::vector<uint8_t>(twice, twice + 4) == std::vector<uint8_t>{0, 10, 30, 40});
    CHECK(twice[1 * 4 + 1] == 30);  // 0.75 * (0.75 * 0 + 0.25 * 40) + 0.25 * (0.75 * 80 + 0.25 * 120)
}

TEST_CASE("load_image_folder: another size is an error without resize, and resized with it") {
    TempDir dir;
    const ImgtestBytes small = {0, 0, 0, 40, 40, 40, 80, 80, 80, 120, 120, 120};  // (2, 2, 3): grey 0, 40 / 80, 120
    ImgtestBytes big;                                                             // (4, 4, 3): grey 10 y + 2 x
    for (int y = 0; y < 4; y++)
        for (int x = 0; x < 4; x++) big.insert(big.end(), 3, (uint8_t)(10 * y + 2 * x));
    imgtest_png(dir.path + "/train/a/1.png", small, 2, 2, 3);
    imgtest_png(dir.path + "/train/b/1.png", big, 4, 4, 3);
    imgtest_png(dir.path + "/test/a/1.png", small, 2, 2, 3);
    imgtest_png(dir.path + "/test/b/1.png", small, 2, 2, 3);
    imgtest_check_error([&] { load_image_folder(dir.path); }, dir.path + "/train/b/1.png",
                        {"4x4 pixels", dir.path + "/train/a/1.png", "is 2x2"});
    ImageData data = load_image_folder(dir.path, 2);
    CHECK(data.train.height == 2);
    CHECK(data.train.width == 2);
    CHECK(data.source.find("resized to 2x2") != std::string::npos);
    for (int c = 0; c < 3; c++) {
        CHECK(std::vector<uint8_t>(data.train.image(1) + 4 * c, data.train.image(1) + 4 * c + 4) ==
              std::vector<uint8_t>{6, 10, 26, 30});
        CHECK(std::vector<uint8_t>(data.train.image(0) + 4 * c, data.train.image(0) + 4 * c + 4) ==
              std::vector<uint8_t>{0, 40, 80, 120});
    }
    data = load_image_folder(dir.path, 4);
    CHECK(data.train.image(0)[1] == 10);  // the 2x2 image enlarged (resize_bilinear's test)
}

TEST_CASE("load_image_folder gives one line naming the path for each broken folder") {
    TempDir dir;
    imgtest_write_image_folder(dir.path);
    const std::string bad = dir.path + "/train/dog/e.png";
    std::ofstream(bad) << "not a png";
    imgtest_check_error([&] { load_image_folder(dir.path); }, bad, {"cannot decode", "("});
    std::filesystem::remove(bad);

    std::filesystem::create_directories(dir.path + "/test/emu");
    imgtest_check_error([&] { load_image_folder(dir.path); }, dir.path + "/test/emu", {"class folder", "lacks"});
    std::filesystem::rename(dir.path + "/test/emu", dir.path + "/train/emu");
    imgtest_check_error([&] { load_image_folder(dir.path); }, dir.path + "/test", {"no class folder emu"});
    std::filesystem::create_directories(dir.path + "/test/emu");
    imgtest_check_error([&] { load_image_folder(dir.path); }, dir.path + "/train/emu", {"no images"});

    TempDir empty;
    std::filesystem::create_directories(empty.path + "/train");
    std::filesystem::create_directories(empty.path + "/test");
    imgtest_check_error([&] { load_image_folder(empty.path); }, empty.path + "/train", {"no class folders"});
    imgtest_check_error([&] { load_image_folder(empty.path + "/absent"); }, empty.path + "/absent/train",
                        {"no such folder", "train/<class>/"});
}
