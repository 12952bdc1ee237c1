// run/signals.h: a run asked to stop (SIGTERM: Slurm's preemption and `kill`; SIGINT: Ctrl-C;
// SIGUSR1: the signal experiments/slurm_array.sh's jobs ask for before their time limit)
// finishes the step it is in, writes its checkpoint, prints one line and exits with
// EXIT_STOPPED; --continue then goes on from that step bit-exactly, as from any checkpoint.
//
// The handler only records the signal in a volatile sig_atomic_t (all a handler may safely do);
// the training loop reads it after each step (main.cu). The handler also restores the default
// action of all three signals, so a second one, while the run is still writing, ends it at
// once: the atomic writes (run/atomic_file.h) leave the previous checkpoint whole. Only runs
// with a run folder catch them; --dump-state, --profile, --generate and --list end as before.
#pragma once
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <string>

// the exit status of a run stopped by a signal, its checkpoint written: not finished (no
// metrics.json), not failed (0 finished, 1 a bug, 2 bad input or a failed write)
static const int EXIT_STOPPED = 3;

static const int STOP_SIGNALS[] = {SIGTERM, SIGINT, SIGUSR1};

static volatile sig_atomic_t stop_signal_caught = 0;  // the signal that asked the run to stop; 0: none

inline void on_stop_signal(int signal_number) {
    stop_signal_caught = signal_number;
    struct sigaction default_action = {};
    default_action.sa_handler = SIG_DFL;
    for (int s : STOP_SIGNALS) sigaction(s, &default_action, nullptr);  // async-signal-safe
}

// From now on SIGTERM, SIGINT and SIGUSR1 ask the run to stop after its step. SA_RESTART: a
// read or write that the signal interrupts goes on rather than failing with EINTR. A signal
// that was ignored (SIGINT in a script's background job) is caught too.
inline void catch_stop_signals() {
    struct sigaction action = {};
    action.sa_handler = on_stop_signal;
    action.sa_flags = SA_RESTART;
    sigemptyset(&action.sa_mask);
    for (int s : STOP_SIGNALS) sigaddset(&action.sa_mask, s);  // one handler at a time
    for (int s : STOP_SIGNALS) sigaction(s, &action, nullptr);
}

// the signal that asked the run to stop, 0 while none has
inline int stop_signal() { return stop_signal_caught; }

inline const char* signal_name(int signal_number) {
    return signal_number == SIGTERM ? "SIGTERM" : signal_number == SIGINT ? "SIGINT" : "SIGUSR1";
}

// The line of a run stopped by a signal after step `step`, its checkpoint at `checkpoint`;
// returns the exit status.
inline int report_stop(int64_t step, const std::string& checkpoint) {
    fflush(stdout);  // the line comes after everything the run printed
    fprintf(stderr, "maskprior: stopped by %s after step %lld: wrote %s (--continue goes on from there)\n",
            signal_name(stop_signal()), (long long)step, checkpoint.c_str());
    return EXIT_STOPPED;
}
