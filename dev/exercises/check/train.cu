// dev/exercises/check/train.cu: the kernel course's step 9, the learner's part of the trainer: the
// file EXERCISE (its two launchers and the kernels they launch), compiled on its own and linked with
// main.cu's object built with ATTENTION_EXERCISE (make exercise STEP=9; check/exercise.sh), whose
// table of attention versions names the launchers as its last line (check/train.h).
#include "dev/exercises/check/train.h"  // the launchers' declarations, which the file's definitions match
#include EXERCISE  // attention_forward_exercise_gpu, attention_backward_exercise_gpu
