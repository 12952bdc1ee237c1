// The image tasks as a user meets them: bad flags and missing data (one line, exit code 2), every
// init on a small image folder, a short run that learns, bit-exact resume with augmentation,
// schedule, clipping and smoothing on, and a resume that asks for another image setting refused.
// Uses test_cli.cu's helpers (one translation unit).
#include "test_util.h"

// 3 classes of 8x8 RGB images, written once
static const std::string& tiny_image_folder() {
    static const std::string dir = write_image_folder(TMP_PREFIX + "cli_images", 3, 8, 8, 7);
    return dir;
}

TEST_CASE("image tasks: bad flags and missing data get one clear line and exit code 2") {
    const std::string images = "--task images --data-dir " + tiny_image_folder() + " ";
    expect_error("--task images", "--task images needs --data-dir");
    expect_error("--task cifar10", "--task cifar10 needs --data-dir");
    expect_error("--task images --data-dir " + TMP_PREFIX + "no_such_folder", "no_such_folder");
    expect_error("--task fashion-mnist --data-dir " + TMP_PREFIX + "no_such_folder", "train-images-idx3-ubyte");
    expect_error("--task cifar10 --data-dir " + TMP_PREFIX + "no_such_folder", "sh data/get_cifar.sh 10");
    expect_error(images + "--patch 3", "--patch 3 does not divide");
    expect_error(images + "--mask-window 4", "--mask-window must be odd");
    expect_error("--task maj3 --patch 2", "--patch is for the image tasks");
    expect_error("--task maj3 --pool mean", "--pool is for the image tasks");
    expect_error("--task maj3 --init impulse", "--init impulse is for the image tasks");
    expect_error("--task maj3 --label-smoothing 0.1", "needs a classification or next-token readout");
    expect_error(images + "--coarse-labels", "--coarse-labels is for cifar100");
    expect_error(images + "--label-smoothing 1", "--label-smoothing must be below 1");
    expect_error(images + "--schedule linear", "--schedule must be one of constant, cosine");
}

// MNIST's four IDX files (raw, big-endian sizes) holding `count` 4x4 images of classes i % 10
static std::string write_idx_folder(const std::string& dir, int count) {
    std::filesystem::create_directories(dir);
    auto write = [&](const std::string& name, uint32_t magic, std::vector<uint32_t> sizes, int bytes_per_item) {
        std::ofstream f(dir + "/" + name, std::ios::binary);
        sizes.insert(sizes.begin(), magic);
        for (uint32_t word : sizes)
            for (int shift = 24; shift >= 0; shift -= 8) f.put((char)(word >> shift));
        for (int i = 0; i < count; i++)
            for (int k = 0; k < bytes_per_item; k++)
                f.put((char)(bytes_per_item == 1 ? i % 10 : (i * 37 + k * 11) % 256));
    };
    for (const char* split : {"train", "t10k"}) {
        write(std::string(split) + "-images-idx3-ubyte", 0x803, {(uint32_t)count, 4, 4}, 16);
        write(std::string(split) + "-labels-idx1-ubyte", 0x801, {(uint32_t)count}, 1);
    }
    return dir;
}

TEST_CASE("image tasks: each data set's augmentation recipe: digits without the flip or the crop, Fashion-MNIST with "
          "padding 2") {
    const std::string idx = write_idx_folder(TMP_PREFIX + "cli_idx", 20);
    expect_error("--task mnist", "--task mnist needs --data-dir");
    struct Case {
        std::string flags, row, crop_pad, flip;
    };
    const std::vector<Case> cases = {
        {"--task mnist --data-dir " + idx, "crop pad 0, no flip (the recipe of mnist)", "0", "0"},
        {"--task mnist --flip --crop-pad 2 --data-dir " + idx, "crop pad 2, flip (flags; mnist's: pad 0, no flip)", "2",
         "1"},
        {"--task fashion-mnist --data-dir " + idx, "crop pad 2, flip (the recipe of fashion-mnist)", "2", "1"},
        {"--task fashion-mnist --no-flip --crop-pad 0 --data-dir " + idx,
         "crop pad 0, no flip (flags; fashion-mnist's: pad 2, flip)", "0", "0"},
        {"--task images --data-dir " + tiny_image_folder(), "crop pad 4, flip (the recipe of images)", "4", "1"},
    };
    for (const Case& c : cases) {
        CAPTURE(c.flags);
        const std::string dir = TMP_PREFIX + "vision_recipe";
        CommandResult r = run_command(TINY + c.flags + " --patch 2 --steps 1 --out " + dir);
        REQUIRE_MESSAGE(r.exit_code == 0, r.out);
        CHECK(r.out.find("| augmentation     | " + c.row) != std::string::npos);
        StFile saved = safetensors_read(dir + "/model.safetensors");
        CHECK(saved.metadata["crop_pad"] == c.crop_pad);
        CHECK(saved.metadata["flip"] == c.flip);
    }
    // the help names each recipe
    CommandResult help = run_command(MASKPRIOR + " --help");
    CHECK(help.out.find("(mnist: off; else on)") != std::string::npos);
    CHECK(help.out.find("(mnist: 0; fashion-mnist: 2; else 4)") != std::string::npos);
}

TEST_CASE("image tasks: every init runs on an image folder and reports top-1 accuracy and the prior mass") {
    for (const char* init : {"default", "mask", "qk-svd", "qk-opt", "mimetic", "impulse"}) {
        const std::string dir = TMP_PREFIX + "vision_init_" + init;
        CommandResult r = run_command(TINY + "--task images --data-dir " + tiny_image_folder() +
                                      " --patch 2 --steps 4 --qk-opt-steps 20 --init " + init + " --out " + dir);
        CAPTURE(init);
        REQUIRE_MESSAGE(r.exit_code == 0, r.out);
        std::ifstream metrics_file(dir + "/metrics.json");
        nlohmann::json metrics = nlohmann::json::parse(metrics_file);
        CHECK(metrics["acc"].get<double>() >= 0.0);
        CHECK(metrics["prior_mass"].size() == 1);
        CHECK(r.out.find("patch 2") != std::string::npos);  // the startup table names the patch size
    }
}

TEST_CASE("image tasks: a short CPU run on coloured classes learns them") {
    const std::string dir = TMP_PREFIX + "vision_learns";
    CommandResult r = run_command(MASKPRIOR + " --device cpu --task images --data-dir " + tiny_image_folder() +
                                  " --patch 4 --batch 12 --steps 60 --lr 3e-3 --out " + dir);
    REQUIRE_MESSAGE(r.exit_code == 0, r.out);
    std::ifstream metrics_file(dir + "/metrics.json");
    nlohmann::json metrics = nlohmann::json::parse(metrics_file);
    CHECK(metrics["acc"].get<double>() >= 0.9);
}

TEST_CASE("image tasks: --resume continues bit-exactly with augmentation, cosine schedule, clipping and smoothing") {
    const std::string run = TINY + "--task images --data-dir " + tiny_image_folder() +
                            " --patch 2 --init mask --warmup 2 --clip-grad 0.5 --eval-every 100 ";
    StFile resumed = expect_resume_bit_exact(run, 3, 7, "vision");
    CHECK(resumed.metadata["patch"] == "2");
    CHECK(resumed.metadata["image"] == "3x8x8");
    CHECK(resumed.metadata["schedule"] == "cosine");
    CHECK(resumed.metadata["weight_decay_on"] == "matrices");  // images: timm's rule
    const std::string checkpoint = " --resume " + TMP_PREFIX + "vision_half/model.safetensors";
    expect_error("--task images --data-dir " + tiny_image_folder() + " --patch 4 --init mask --warmup 2 "
                 "--clip-grad 0.5 --steps 9" + checkpoint, "patch=2, but this run has patch=4");
    expect_error("--task images --data-dir " + tiny_image_folder() + " --patch 2 --init mask --warmup 2 "
                 "--clip-grad 0.5 --mask-window 5 --steps 9" + checkpoint, "mask_window=3");
}

TEST_CASE("image tasks: the weight matrices alone decay, recorded in the checkpoint; one from before the rule "
          "resumes decaying every weight, as it trained") {
    const std::string run = TINY + "--task images --data-dir " + tiny_image_folder() +
                            " --patch 2 --lr 1e-2 --wd 0.5 --eval-every 100 ";
    const std::string dir = TMP_PREFIX + "vision_decay";
    REQUIRE(run_command(run + "--steps 2 --out " + dir).exit_code == 0);
    StFile now = safetensors_read(dir + "/model.safetensors");
    CHECK(now.metadata["weight_decay_on"] == "matrices");
    StFile old = now;  // as a checkpoint of the program before the rule was written
    old.metadata.erase("weight_decay_on");
    safetensors_write(dir + "/old.safetensors", old);
    REQUIRE(run_command(run + "--steps 4 --out " + dir + "_new --resume " + dir + "/model.safetensors").exit_code == 0);
    REQUIRE(run_command(run + "--steps 4 --out " + dir + "_old --resume " + dir + "/old.safetensors").exit_code == 0);
    StFile a = safetensors_read(dir + "_new/model.safetensors"), b = safetensors_read(dir + "_old/model.safetensors");
    CHECK(a.metadata["weight_decay_on"] == "matrices");
    CHECK(b.metadata["weight_decay_on"] == "all");
    // the two rules part the runs (under the old one the LayerNorm weights decay too)
    const StTensor *ln_a = a.find("h.0.ln1.weight"), *ln_b = b.find("h.0.ln1.weight");
    REQUIRE((ln_a && ln_b));
    CHECK(memcmp(ln_a->data.data(), ln_b->data.data(), ln_a->data.size() * sizeof(float)) != 0);
    old.metadata["weight_decay_on"] = "biases";
    safetensors_write(dir + "/bad.safetensors", old);
    expect_error("--task images --data-dir " + tiny_image_folder() + " --patch 2 --lr 1e-2 --wd 0.5 --steps 4 "
                 "--resume " + dir + "/bad.safetensors", "'weight_decay_on' is 'biases', not all or matrices");
}

TEST_CASE("image tasks: --pe-scale S multiplies wpe alone, before the init; impulse's is 18 unless told; "
          "recorded, named in the variant, and S <= 0 refused") {
    const std::string images = "--task images --data-dir " + tiny_image_folder() + " --patch 2 ";
    auto dump = [&](const std::string& flags, const std::string& name) {
        const std::string path = TMP_PREFIX + "pe_scale_" + name + ".safetensors";
        CommandResult r = run_command(TINY + images + flags + " --dump-state " + path);
        REQUIRE_MESSAGE(r.exit_code == 0, r.out);
        return safetensors_read(path);
    };
    // the parameters (not the gradients, the batch or the loss) of a and b: b's wpe is S times a's
    auto expect_wpe_scaled = [](StFile& a, StFile& b, float S, bool rest_equal) {
        for (const StTensor& t : a.tensors) {
            if (t.name.rfind("grad.", 0) == 0 || t.name.rfind("batch.", 0) == 0 || t.name == "loss") continue;
            const StTensor* u = b.find(t.name);
            REQUIRE(u);
            CAPTURE(t.name);
            if (t.name == "wpe")
                for (size_t i = 0; i < t.data.size(); i++) CHECK(u->data[i] == S * t.data[i]);
            else if (rest_equal)
                CHECK(u->data == t.data);
        }
    };
    StFile plain = dump("--init default", "default"), control = dump("--init default --pe-scale 18", "default18");
    expect_wpe_scaled(plain, control, 18.0f, true);  // the control: the position signal alone is stronger
    CHECK(plain.metadata["pe_scale"] == "1");
    CHECK(control.metadata["pe_scale"] == "18");
    StFile impulse = dump("--init impulse", "impulse"), unscaled = dump("--init impulse --pe-scale 1", "impulse1");
    expect_wpe_scaled(unscaled, impulse, 18.0f, false);  // the fit differs: it sees the scaled wpe
    CHECK(impulse.metadata["pe_scale"] == "18");

    const std::string dir = TMP_PREFIX + "vision_pe18";
    CommandResult r = run_command(TINY + images + "--init default --pe-scale 18 --steps 2 --out " + dir);
    REQUIRE_MESSAGE(r.exit_code == 0, r.out);
    CHECK(r.out.find("position embedding x18 before the init, and kept") != std::string::npos);
    std::ifstream metrics_file(dir + "/metrics.json");
    CHECK(nlohmann::json::parse(metrics_file)["variant"] == "default-pe18");
    expect_error(images + "--init default --steps 4 --resume " + dir + "/model.safetensors",
                 "pe_scale=18; this run asks for pe_scale=1");
    r = run_command(TINY + images + "--init impulse --steps 1 --out " + TMP_PREFIX + "vision_pe_impulse");
    REQUIRE_MESSAGE(r.exit_code == 0, r.out);
    CHECK(r.out.find("impulse's own structure: mass") != std::string::npos);  // the step-0 check
    expect_error(images + "--pe-scale 0", "--pe-scale must be greater than 0, got 0");
    expect_error(images + "--pe-scale -2", "--pe-scale must be greater than 0, got -2");
    expect_error(images + "--pe-scale x", "--pe-scale expects a number, got 'x'");
}
