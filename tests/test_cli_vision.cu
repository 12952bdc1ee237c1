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
    const std::string checkpoint = " --resume " + TMP_PREFIX + "vision_half/model.safetensors";
    expect_error("--task images --data-dir " + tiny_image_folder() + " --patch 4 --init mask --warmup 2 "
                 "--clip-grad 0.5 --steps 9" + checkpoint, "patch=2, but this run has patch=4");
    expect_error("--task images --data-dir " + tiny_image_folder() + " --patch 2 --init mask --warmup 2 "
                 "--clip-grad 0.5 --mask-window 5 --steps 9" + checkpoint, "mask_window=3");
}
