// The language model as a user meets it: bad flags and data (one line, exit code 2), a short run
// that learns a token walk and reports its metrics, bit-exact resume of the mask variants, a
// frozen mask that stays put, and sampling from the checkpoint (seeded, greedy, refused for a
// model that is not a language model). Uses test_cli.cu's helpers (one translation unit).
#include "test_util.h"
#include "text_fixture.h"

// 64 ids, 6000 training tokens of the walk (mostly +1): something a tiny model learns fast
static const std::string& walk_folder() {
    static const std::string dir = write_walk_folder(TMP_PREFIX + "lm_walk", 64, 6000, 1200);
    return dir;
}

TEST_CASE("--task lm: bad flags and data get one clear line and exit code 2") {
    const std::string lm = "--task lm --data-dir " + walk_folder() + " ";
    expect_error("--task lm", "--task lm needs --data-dir");
    expect_error("--task lm --data-dir " + TMP_PREFIX + "no_such_folder", "no_such_folder/tokenizer.bin");
    expect_error("--task maj3 --seq-len 8", "--seq-len is for --task lm");
    expect_error("--task maj3 --mask-prior alibi --init mask", "--mask-prior is for --task lm");
    expect_error("--task maj3 --data-dir x", "--data-dir is for the image tasks and --task lm");
    expect_error(lm + "--mask-prior alibi", "--mask-prior alibi needs --init mask");
    expect_error(lm + "--freeze-mask", "--freeze-mask needs --init mask");
    expect_error(lm + "--mask-prior diagonal --init mask", "--mask-prior must be one of window, alibi");
    expect_error(lm + "--seq-len 5000", "too few for training windows");
    expect_error(lm + "--seq-len 65 --attention-kernel 4", "attention kernel 4 holds at most 64 tokens (T 65)");
    expect_error(lm + "--patch 2", "--patch is for the image tasks");
    expect_error("--task maj3 --prompt hello", "--prompt and --top-k are for --generate");
    expect_error("--generate x.safetensors --task maj3", "--generate samples from a language model, not maj3");
    expect_error("--generate x.safetensors --data-dir x --width 64", "--width is not for --generate");
    CommandResult missing = run_command(MASKPRIOR + " --generate " + TMP_PREFIX + "no_such.safetensors", true);
    CHECK(missing.exit_code == 2);
    CHECK(missing.out.find("cannot open") != std::string::npos);
}

TEST_CASE("--task lm: a short run learns the walk, reports loss, perplexity and bits per byte; resume is bit-exact") {
    const std::string run = MASKPRIOR + " --device cpu --task lm --data-dir " + walk_folder() +
                            " --width 32 --layers 2 --heads 2 --head-size 16 --mlp 64 --seq-len 16 --batch 16 ";
    const std::string dir = TMP_PREFIX + "lm_learns";
    CommandResult r =
        run_command(run + "--init mask --mask-window 4 --steps 150 --lr 3e-3 --eval-every 50 --out " + dir);
    REQUIRE_MESSAGE(r.exit_code == 0, r.out);
    CHECK(r.out.find("tokens/s") != std::string::npos);
    std::ifstream metrics_file(dir + "/metrics.json");
    nlohmann::json m = nlohmann::json::parse(metrics_file);
    // the walk's best loss is about 0.6 nats (a +1 step 7 times in 8); a model that knows nothing: ln 64 = 4.16
    CHECK(m["val_loss"].get<double>() < 1.5);
    CHECK(m["perplexity"].get<double>() == doctest::Approx(std::exp(m["val_loss"].get<double>())));
    CHECK(m["bits_per_byte"].get<double>() > 0);
    CHECK(m["eval_tokens"].get<double>() == 16.0 * ((1200 - 1) / 16));
    CHECK(m["variant"] == "mask");
    CHECK(m["prior_mass"].size() == 2);
    StFile saved = safetensors_read(dir + "/model.safetensors");
    CHECK(saved.metadata["mask_prior"] == "window");
    CHECK(saved.metadata["mask_window"] == "4");

    const std::string tiny = MASKPRIOR + " --device cpu --task lm --data-dir " + walk_folder() +
                             " --width 16 --layers 2 --heads 2 --head-size 8 --mlp 16 --seq-len 16 --batch 4 "
                             "--eval-every 100 --eval-windows 4 --warmup 2 ";
    StFile alibi = expect_resume_bit_exact(tiny + "--init mask --mask-prior alibi ", 3, 7, "lm_alibi");
    CHECK(alibi.metadata["mask"] == "head");  // ALiBi's slopes: one mask per head
    CHECK(alibi.metadata["mask_prior"] == "alibi");
    StFile frozen = expect_resume_bit_exact(tiny + "--init mask --freeze-mask ", 3, 7, "lm_frozen");
    CHECK(frozen.metadata["freeze_mask"] == "1");
    // a frozen mask is the init's ±c after every step
    for (const char* name : {"h.0.attn.mask", "h.1.attn.mask"}) {
        const StTensor* mask = frozen.find(name);
        REQUIRE(mask);
        for (float v : mask->data) CHECK((v == 6.0f || v == -6.0f));
    }
    const std::string checkpoint = " --resume " + TMP_PREFIX + "lm_alibi_half/model.safetensors";
    CommandResult other = run_command(tiny + "--init mask --steps 9" + checkpoint, true);
    CHECK(other.exit_code == 2);
    CHECK(other.out.find("mask") != std::string::npos);
    CommandResult unfrozen = run_command(tiny + "--init mask --mask-prior alibi --freeze-mask --steps 9" + checkpoint,
                                         true);
    CHECK(unfrozen.exit_code == 2);
    CHECK(unfrozen.out.find("freeze_mask=0") != std::string::npos);

    // sampling from the trained model: a seed gives the same text; top-k 1 is greedy; other seeds differ
    const std::string generate =
        MASKPRIOR + " --device cpu --generate " + dir + "/model.safetensors --sample-tokens 60 ";
    auto text_of = [](const std::string& cmd) { return run_command("(" + cmd + " 2>/dev/null)"); };  // stdout only
    CommandResult one = text_of(generate + "--seed 5"), again = text_of(generate + "--seed 5");
    REQUIRE_MESSAGE(one.exit_code == 0, one.out);
    CHECK(one.out.size() == 60);  // a character per token (text_fixture.h)
    CHECK(one.out == again.out);
    CHECK(one.out != text_of(generate + "--seed 6").out);
    CHECK(text_of(generate + "--top-k 1 --seed 1").out == text_of(generate + "--temperature 0 --seed 2").out);
    // ids 17, 18 are the characters A, B (text_fixture.h); the walk's +1 steps, greedily
    CHECK(text_of(generate + "--prompt AB --temperature 0").out.rfind("ABCDEFG", 0) == 0);

    REQUIRE(run_command(TINY + "--task maj3 --steps 2 --out " + TMP_PREFIX + "lm_not").exit_code == 0);
    CommandResult not_lm = run_command(MASKPRIOR + " --generate " + TMP_PREFIX + "lm_not/model.safetensors", true);
    CHECK(not_lm.exit_code == 2);
    CHECK(not_lm.out.find("not a language model's checkpoint") != std::string::npos);
}
