// SIGTERM / SIGINT / SIGUSR1 handling for training: the first signal asks the loop to finish its
// step, checkpoint and exit with 128 + signal; a second one exits at once (the checkpoint write is
// atomic, so nothing already written is corrupted).
#pragma once

namespace tandem::train {

void install_stop_signal_handlers();
// 0 while no signal arrived, else the first signal's number.
int stop_signal();

}  // namespace tandem::train
