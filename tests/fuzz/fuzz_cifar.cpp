// tests/fuzz/fuzz_cifar.cpp: libFuzzer harness of the CIFAR binary reader (tasks/image_files.h:
// read_cifar_file, read_class_names). Each input is read as records of CIFAR-10, of CIFAR-100
// (fine labels) and of CIFAR-100 (coarse labels), expecting as many whole records as its size
// holds, all appended to one ImageSet; and as a class-name file of 10, 20 and 100 names.
// Accepted records must give 3x32x32 images, as many as labels, each label below the classes;
// accepted names must be that many, none empty, none with surrounding white space.
// Valid seeds (tests/fuzz/corpus/cifar/valid/): cifar10-*.bin and cifar100-*.bin (records of
// CIFAR-10 test images), batches.meta.txt (10 names), coarse_label_names.txt (20),
// fine_label_names.txt (100).
//   make tests/fuzz/bin/fuzz_cifar && sh tests/fuzz/run_fuzz.sh --seconds 60 cifar
//   tests/fuzz/bin/fuzz_cifar CRASH_FILE               (replays one input, from the repository root)
#define FUZZ_NAME "cifar"
#include <cctype>
#include "tests/fuzz/fuzz.h"
#include "tasks/image_files.h"

static void read_records(const std::string& path, size_t size, const CifarFormat& format, ImageSet& set) {
    const size_t first = set.labels.size();
    read_cifar_file(path, (int)(size / format.record_bytes()), format, set);
    check(set.channels == CIFAR_CHANNELS && set.height == CIFAR_SIDE && set.width == CIFAR_SIDE &&
              set.pixels.size() == set.labels.size() * CIFAR_IMAGE_BYTES,
          "records accepted whose images are not 3x32x32, one per label");
    for (size_t i = first; i < set.labels.size(); i++)
        check(set.labels[i] >= 0 && set.labels[i] < format.classes, "a label outside the classes accepted");
}

static void read_names(const std::string& path, int classes) {
    const std::vector<std::string> names = read_class_names(path, classes, {});
    check((int)names.size() == classes, "class names accepted for another count");
    for (const std::string& name : names)
        check(!name.empty() && !isspace((unsigned char)name.front()) && !isspace((unsigned char)name.back()),
              "a class name accepted that is empty or has surrounding white space");
}

void parse(const std::string& seed, const uint8_t* data, size_t size) {
    const std::string path = write_input("cifar.bin", data, size);
    const CifarFormat formats[3] = {cifar_format(10, false), cifar_format(100, false), cifar_format(100, true)};
    if (seed.empty()) {
        ImageSet set;
        for (const CifarFormat& format : formats) try_parse([&] { read_records(path, size, format, set); });
        for (int classes : {10, 20, 100}) try_parse([&] { read_names(path, classes); });
        return;
    }
    ImageSet set;
    if (seed.rfind("cifar100-", 0) == 0) {
        read_records(path, size, formats[1], set);
        read_records(path, size, formats[2], set);
    } else if (seed.rfind("cifar10-", 0) == 0) {
        read_records(path, size, formats[0], set);
    } else {
        read_names(path, seed == "batches.meta.txt" ? 10 : seed == "coarse_label_names.txt" ? 20 : 100);
    }
}
