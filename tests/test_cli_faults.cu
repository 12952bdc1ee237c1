// Faults as a user meets them: outputs checked before the first step, periodic checkpoints and
// --continue, a diverging run that keeps its last good checkpoint and says so. Uses
// test_cli.cu's helpers (one translation unit). Killing runs with SIGKILL at every point is
// tests/test_faults.sh.
#include <sys/stat.h>
#include <fstream>
#include "test_util.h"
#include "run/safetensors.h"

static bool file_exists(const std::string& path) {
    struct stat st;
    return stat(path.c_str(), &st) == 0;
}

TEST_CASE("faults: a bad output path is refused before anything trains, with one line") {
    expect_error("--task maj3 --save /proc/no/model.safetensors", "cannot write /proc/no/model.safetensors");
    expect_error("--task maj3 --out /proc/run", "cannot create folder /proc/run");
    expect_error("--task maj3 --dump-state /nonexistent/state.safetensors", "cannot write /nonexistent/state");
    // the data is not even loaded: a bad --out is found before a missing data folder
    expect_error("--task lm --data-dir /nonexistent --out /proc/run", "cannot create folder /proc/run");
    CommandResult r = run_command(TINY + "--task maj3 --steps 5 --save /proc/no/model.safetensors");
    CHECK(r.out.find("step ") == std::string::npos);  // no step was taken
    expect_error("--task maj3 --continue --resume x.safetensors", "give --continue or --resume FILE, not both");
    expect_error("--task maj3 --checkpoint-every -1", "--checkpoint-every must be at least 0");
    expect_error("--task maj3 --dump-state " + TMP_PREFIX + "d.safetensors --continue", "trains nothing");
}

TEST_CASE("faults: periodic checkpoints hold the step; --continue goes on from them, or starts afresh") {
    const std::string run = TINY + "--task maj3 --init mask --eval-every 4 --checkpoint-every 3 ";
    const std::string dir = TMP_PREFIX + "continue";
    // 7 steps with a checkpoint every 3: the file holds step 7 at the end (3 and 6 were overwritten)
    REQUIRE(run_command(run + "--steps 7 --out " + dir + " --continue").exit_code == 0);  // nothing to continue
    StFile done = safetensors_read(dir + "/model.safetensors");
    CHECK(done.metadata["step"] == "7");
    CHECK(done.metadata.count("metrics") == 1);  // the final checkpoint carries metrics.json's content
    CHECK(!file_exists(dir + "/model.safetensors.tmp"));
    // the same folder with more steps continues from step 7, not from 0
    CommandResult more = run_command(run + "--steps 10 --out " + dir + " --continue");
    CHECK(more.exit_code == 0);
    CHECK(more.out.find("10 (from 7)") != std::string::npos);
    // a finished run continued again writes metrics.json from its checkpoint and trains nothing
    remove((dir + "/metrics.json").c_str());
    CommandResult again = run_command(run + "--steps 10 --out " + dir + " --continue");
    CHECK(again.exit_code == 0);
    CHECK(again.out.find("the run was finished (step 10)") != std::string::npos);
    CHECK(file_exists(dir + "/metrics.json"));
    // a checkpoint of another run in the folder is refused, not overwritten
    expect_error("--task maj3 --init default --steps 10 --out " + dir + " --continue", "mask=layer");
}

TEST_CASE("faults: a diverging run writes no checkpoint from non-finite numbers and names the last good one") {
    const std::string dir = TMP_PREFIX + "diverge";
    // at lr 1e8 the parameters overflow in step 2; at 1e12 the loss of the step after step 1 is NaN
    for (const char* lr : {"1e8", "1e12"}) {
        CAPTURE(lr);
        CommandResult r = run_command(TINY + "--task maj3 --steps 20 --checkpoint-every 1 --out " + dir +
                                      " --lr " + lr, true);
        CHECK(r.exit_code == 2);
        CHECK(r.out.find("the last good checkpoint is " + dir + "/model.safetensors (step 1)") != std::string::npos);
        StFile last = safetensors_read(dir + "/model.safetensors");
        CHECK(last.metadata["step"] == "1");
        for (const StTensor& t : last.tensors)
            for (float v : t.data) REQUIRE(std::isfinite(v));
    }
    CommandResult r = run_command(TINY + "--task maj3 --steps 20 --checkpoint-every 0 --out " + dir + "_none" +
                                  " --lr 1e12", true);
    CHECK(r.out.find("no checkpoint was written") != std::string::npos);
}
