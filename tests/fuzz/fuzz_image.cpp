// tests/fuzz/fuzz_image.cpp: libFuzzer harness of the image-folder reader (tasks/image_folder.h),
// which decodes PNG, JPEG and BMP files with stb_image. The input is the one image of a folder
// data set, dir/train/c/image.png, with dir/test/c/image.png a link to it; load_image_folder
// reads it as it is (an input of even size) or resized to 8x8 (odd size): two decodes an input,
// not four. An accepted data set must hold one image in each split, of 1 or 3 channels, with its
// pixels (and 8x8 when resized). An input whose header claims more than 2^18 pixels only goes as
// far as read_image_file's checks: stb decodes the pixels a file lacks as zeros, and decoding
// millions of them under the sanitizers takes seconds an input (up to IMAGE_MAX_PIXELS) and finds
// nothing that the small images do not.
// Valid seeds: tests/fuzz/corpus/image/valid/, CIFAR-10 and Fashion-MNIST images as JPEG (baseline
// and progressive), PNG (grey, grey+alpha, RGB, palette, 16-bit grey) and BMP.
//   make tests/fuzz/bin/fuzz_image && sh tests/fuzz/run_fuzz.sh --seconds 60 image
//   tests/fuzz/bin/fuzz_image CRASH_FILE               (replays one input, from the repository root)
#define FUZZ_NAME "image"
#include "tests/fuzz/fuzz.h"
#include "tasks/image_folder.h"

static void read(const std::string& dir, int resize) {
    const ImageData data = load_image_folder(dir, resize);
    for (const ImageSet* set : {&data.train, &data.test}) {
        check(set->size() == 1 && set->labels[0] == 0 && (set->channels == 1 || set->channels == 3) &&
                  set->height > 0 && set->width > 0 && set->pixels.size() == set->image_bytes(),
              "an image accepted whose set is not one image with its pixels");
        check(resize == 0 || (set->height == resize && set->width == resize), "an image not resized");
    }
}

// more than 2^18 pixels in the header (asked only of a file that read_image_file found safe for stb;
// stb gives a top-down BMP's height negative)
static bool large(const uint8_t* data, size_t size) {
    int width = 0, height = 0, channels = 0;
    return stbi_info_from_memory(data, (int)size, &width, &height, &channels) &&
           std::abs((int64_t)width) * std::abs((int64_t)height) > 1 << 18;
}

void parse(const std::string& seed, const uint8_t* data, size_t size) {
    const std::string path = write_input("images/train/c/image.png", data, size);
    const std::string dir = work_dir() + "/images", link = dir + "/test/c/image.png";
    if (!std::filesystem::exists(link)) {
        std::filesystem::create_directories(dir + "/test/c");
        std::filesystem::create_symlink("../../train/c/image.png", link);
    }
    if (seed.empty()) {
        if (try_parse([&] { read_image_file(path); }) && !large(data, size))
            try_parse([&] { read(dir, size % 2 ? 8 : 0); });
        return;
    }
    read(dir, 0);
    read(dir, 8);
}
