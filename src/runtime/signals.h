// Graceful stop on SIGTERM, SIGINT (Ctrl-C) and SIGUSR1 (what Slurm sends before a job's time limit, e.g. `#SBATCH
// --signal=USR1@300`): the handler only sets a flag; the GRPO loop polls it between steps, writes a checkpoint and
// exits with kExitInterrupted (3). A second signal of the same kind, while the first is pending, ends the process at
// once (the default action), so a run that never polls can still be stopped.
#pragma once

namespace hone {

void install_stop_handlers();       // call once the command is ready to poll (after MPI_Init)
bool stop_requested();              // a stop signal arrived on this rank
int stop_signal();                  // which signal (SIGTERM, SIGINT or SIGUSR1), 0 when none
const char* stop_signal_name(int sig);  // "SIGTERM", "SIGINT", "SIGUSR1"
bool stop_requested_on_any_rank();  // collective over MPI_COMM_WORLD (local without MPI): all ranks agree to stop

}  // namespace hone
