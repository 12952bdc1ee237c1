// Faults as a user meets them: outputs checked before the first step, periodic checkpoints and
// --continue, a diverging run that keeps its last good checkpoint and says so, a run stopped by
// a signal, two runs on one folder, a full disk. Uses test_cli.cu's helpers (one translation
// unit). Killing and stopping runs at every point, then comparing bit for bit, is
// tests/test_faults.sh.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <csignal>
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

// Starts `cmd` (a shell command line) in the background, its stdout to /dev/null and its
// stderr to the file descriptor err. With file_limit >= 0 no file it writes may grow past
// file_limit bytes (RLIMIT_FSIZE, SIGXFSZ ignored): a write past it fails with EFBIG, as one on
// a full disk fails with ENOSPC. Returns the pid of the program itself (sh execs it).
static pid_t start_command(const std::string& cmd, int err, long file_limit = -1) {
    const std::string line = "exec " + cmd + " > /dev/null";  // made before fork: no malloc after it
    const pid_t pid = fork();
    if (pid == 0) {
        dup2(err, 2);
        if (file_limit >= 0) {
            signal(SIGXFSZ, SIG_IGN);
            const rlimit limit = {(rlim_t)file_limit, (rlim_t)file_limit};
            setrlimit(RLIMIT_FSIZE, &limit);
        }
        execl("/bin/sh", "sh", "-c", line.c_str(), (char*)nullptr);
        _exit(127);
    }
    REQUIRE(pid > 0);
    return pid;
}

// start_command with the stderr to the file err_path
static pid_t start_command(const std::string& cmd, const std::string& err_path) {
    const int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    REQUIRE(err >= 0);
    const pid_t pid = start_command(cmd, err);
    close(err);
    return pid;
}

// Waits for a command start_command started: its exit status, or 128 + the signal that ended it.
static int wait_command(pid_t pid) {
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// A command run to its end under a file-size limit (start_command): its exit status and its
// stderr, read through a pipe, which no file-size limit cuts short.
static CommandResult run_with_file_limit(const std::string& cmd, long file_limit) {
    int pipe_ends[2];  // read, write
    REQUIRE(pipe2(pipe_ends, O_CLOEXEC) == 0);
    const pid_t pid = start_command(cmd, pipe_ends[1], file_limit);
    close(pipe_ends[1]);
    std::string err;
    char buf[4096];
    for (ssize_t got; (got = read(pipe_ends[0], buf, sizeof buf)) > 0;) err.append(buf, got);
    close(pipe_ends[0]);
    return {wait_command(pid), err};
}

// Waits (up to a minute) until a run has written the first row of its log.jsonl: it is training.
static void wait_for_log_row(const std::string& dir) {
    for (int tries = 0; tries < 600 && read_file(dir + "/log.jsonl").find('\n') == std::string::npos; tries++)
        usleep(100000);
    REQUIRE(read_file(dir + "/log.jsonl").find('\n') != std::string::npos);
}

static long file_size(const std::string& path) { return (long)read_file(path).size(); }

// the step a checkpoint holds
static std::string checkpoint_step(const std::string& path) { return safetensors_read(path).metadata["step"]; }

TEST_CASE("faults: SIGTERM, SIGINT and SIGUSR1 stop a run after its step, its checkpoint written, exit 3") {
    const std::string run = TINY + "--task maj3 --steps 100000000 --checkpoint-every 0 --eval-every 100000000 ";
    for (int signal_number : {SIGTERM, SIGINT, SIGUSR1}) {
        const std::string name = signal_number == SIGTERM ? "SIGTERM" : signal_number == SIGINT ? "SIGINT" : "SIGUSR1";
        CAPTURE(name);
        const std::string dir = TMP_PREFIX + "stop_" + name, err = dir + ".err";
        const pid_t pid = start_command(run + "--out " + dir, err);
        wait_for_log_row(dir);
        REQUIRE(kill(pid, signal_number) == 0);
        CHECK(wait_command(pid) == 3);
        // one line: the signal, the step, the checkpoint; the checkpoint holds that step
        const std::string line = read_file(err);
        CAPTURE(line);
        CHECK(std::count(line.begin(), line.end(), '\n') == 1);
        const std::string start = "maskprior: stopped by " + name + " after step ";
        REQUIRE(line.rfind(start, 0) == 0);
        const std::string step = line.substr(start.size(), line.find(':', start.size()) - start.size());
        CHECK(line.find(": wrote " + dir + "/model.safetensors (--continue goes on from there)") != std::string::npos);
        CHECK(checkpoint_step(dir + "/model.safetensors") == step);
        CHECK(!file_exists(dir + "/metrics.json"));  // not finished
        // --continue goes on from that step
        const std::string until = std::to_string(atoll(step.c_str()) + 3);
        CommandResult more = run_command(TINY + "--task maj3 --steps " + until + " --out " + dir + " --continue");
        CHECK(more.exit_code == 0);
        CHECK(more.out.find(until + " (from " + step + ")") != std::string::npos);
    }
    // a second signal while the first is handled ends the run at once (the default action is back);
    // one thread, so that no two threads take the two signals at the same moment
    const std::string dir = TMP_PREFIX + "stop_twice";
    const pid_t pid = start_command("env OMP_NUM_THREADS=1 " + run + "--out " + dir, dir + ".err");
    wait_for_log_row(dir);
    REQUIRE(kill(pid, SIGTERM) == 0);
    REQUIRE(kill(pid, SIGUSR1) == 0);
    const int exit_code = wait_command(pid);
    CHECK((exit_code == 128 + SIGTERM || exit_code == 128 + SIGUSR1));
}

TEST_CASE("faults: one run per folder: a second is refused, naming the holder; a killed run's lock is free") {
    const std::string dir = TMP_PREFIX + "locked";
    const pid_t pid = start_command(TINY + "--task maj3 --steps 100000000 --checkpoint-every 0 --out " + dir,
                                    dir + ".err");
    wait_for_log_row(dir);
    const std::string log = read_file(dir + "/log.jsonl");
    expect_error("--task maj3 --steps 10 --out " + dir + " --continue",
                 dir + " is in use by another run (pid " + std::to_string(pid) + "): one run per folder");
    expect_error("--task maj3 --steps 10 --out " + dir, "is in use by another run");  // without --continue too
    CHECK(read_file(dir + "/log.jsonl") == log);  // the refused runs wrote nothing
    CHECK(!file_exists(dir + "/log.jsonl.tmp"));
    // a run without a folder takes no lock: it may write into a locked one
    CHECK(run_command(TINY + "--task maj3 --dump-state " + dir + "/state.safetensors").exit_code == 0);
    // kill -9: the kernel releases the lock with the process
    REQUIRE(kill(pid, SIGKILL) == 0);
    CHECK(wait_command(pid) == 128 + SIGKILL);
    CHECK(read_file(dir + "/.lock") == std::to_string(pid) + "\n");  // the dead holder's pid is still written there
    CommandResult again = run_command(TINY + "--task maj3 --steps 5 --out " + dir + " --continue");
    CHECK(again.exit_code == 0);
    CHECK(file_exists(dir + "/metrics.json"));
}

TEST_CASE("faults: a failed write (a file-size limit, as a full disk) keeps the last checkpoint: one line, exit 2") {
    const std::string run = TINY + "--task maj3 --init mask --steps 20 --checkpoint-every 5 ";
    const std::string logged = TINY + "--task add3 --data-frac 0.002 --max-test 16 --steps 100 --eval-every 1 " +
                               "--checkpoint-every 10 ";
    const std::string whole = TMP_PREFIX + "limit_whole";
    REQUIRE(run_command(run + "--out " + whole).exit_code == 0);
    const long final_size = file_size(whole + "/model.safetensors");
    const StFile final_checkpoint = safetensors_read(whole + "/model.safetensors");
    // the checkpoint: the periodic ones fit, the final one (metrics.json's content besides) does not
    const std::string dir = TMP_PREFIX + "limit_checkpoint";
    const long limit = final_size - (long)final_checkpoint.metadata.at("metrics").size() / 2;
    CommandResult r = run_with_file_limit(run + "--out " + dir, limit);
    CAPTURE(r.out);
    CHECK(r.exit_code == 2);
    CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1);
    CHECK(r.out == "maskprior: error: cannot write " + dir + "/model.safetensors.tmp: File too large; the last good " +
                       "checkpoint is " + dir + "/model.safetensors (step 15)\n");
    CHECK(!file_exists(dir + "/model.safetensors.tmp"));  // removed: a full disk gets its space back
    CHECK(!file_exists(dir + "/metrics.json"));
    // the last good checkpoint is whole: resumed, it ends as the run that had room
    CHECK(checkpoint_step(dir + "/model.safetensors") == "15");
    CommandResult resumed = run_command(run + "--out " + dir + "_resumed --resume " + dir + "/model.safetensors");
    CHECK(resumed.exit_code == 0);
    const StFile end = safetensors_read(dir + "_resumed/model.safetensors");
    REQUIRE(end.tensors.size() == final_checkpoint.tensors.size());
    for (size_t i = 0; i < end.tensors.size(); i++) CHECK(end.tensors[i].data == final_checkpoint.tensors[i].data);

    // log.jsonl: a row every step grows it past the checkpoint, and a row is cut short at the limit
    REQUIRE(run_command(logged + "--out " + whole + "_log").exit_code == 0);
    const long log_size = file_size(whole + "_log/log.jsonl");
    REQUIRE(log_size > file_size(whole + "_log/model.safetensors") + 2000);
    const std::string log_dir = TMP_PREFIX + "limit_log";
    r = run_with_file_limit(logged + "--out " + log_dir, (log_size + file_size(whole + "_log/model.safetensors")) / 2);
    CHECK(r.exit_code == 2);
    CHECK(r.out == "maskprior: error: cannot write " + log_dir + "/log.jsonl: File too large\n");
    const std::string step = checkpoint_step(log_dir + "/model.safetensors");
    CHECK((step != "" && step != "100"));
    // --continue with room drops the cut row and ends as the run that had room, log and all
    CHECK(run_command(logged + "--out " + log_dir + " --continue").exit_code == 0);
    CHECK(read_file(log_dir + "/log.jsonl") == read_file(whole + "_log/log.jsonl"));

    // metrics.json: a finished run continued without it writes it from the checkpoint alone. The limit
    // is 1 KB, not less: libomp (clang's OpenMP) sizes a 1 KB file in /dev/shm at start-up, and stops
    // the program when a limit refuses it
    const std::string checkpoint = read_file(whole + "/model.safetensors");
    const long metrics_limit = 1024;
    REQUIRE(file_size(whole + "/metrics.json") > metrics_limit);
    remove((whole + "/metrics.json").c_str());
    r = run_with_file_limit(run + "--out " + whole + " --continue", metrics_limit);
    CHECK(r.exit_code == 2);
    CHECK(r.out == "maskprior: error: cannot write " + whole + "/metrics.json.tmp: File too large\n");
    CHECK(!file_exists(whole + "/metrics.json.tmp"));
    CHECK(read_file(whole + "/model.safetensors") == checkpoint);

    // the pictures: structure.png fits, the step-0 attention map does not
    const std::string pictures = TMP_PREFIX + "limit_pictures";
    REQUIRE(file_size(whole + "/structure.png") < 3000);
    REQUIRE(file_size(whole + "/attention_step0.png") > 3000);
    r = run_with_file_limit(run + "--out " + pictures, 3000);
    CHECK(r.exit_code == 2);
    CHECK(r.out == "maskprior: error: cannot write " + pictures + "/attention_step0.png.tmp: File too large\n");
}
