# Shared by the study drivers (weak_scaling, strong_scaling, bubble_study): options, and running
# or submitting one point. A driver sets `study_name`, `study_usage` and the defaults below, calls
# `study_parse_options "$@"`, then `study_point SCHEME_SPEC W D N` for each point and
# `study_finish`. SCHEME_SPEC is scheme[:variant[:pipes]], e.g. chimera, chimera:doubling,
# chimera:direct:4.
# shellcheck shell=bash disable=SC2034,SC2154  # variables shared with the drivers

die() { echo "error: $*" >&2; exit 2; }

study_common_help() {
  cat <<'HELP'
Common options:
  --schemes LIST     comma-separated scheme[:variant[:pipes]] (e.g. chimera,chimera:doubling,1f1b)
  -D d               pipeline stages (ranks per pipeline group)
  -B b               samples per micro-batch
  --config FILE      run config TOML (model, data; must set [data] seq_len)
  --out DIR          output folder of the study (NAME.run.json, .metrics.jsonl, .out per run)
  --steps K          training steps per run
  --compute MODE     real, or emulate (timed waits of --cost; all messages stay real)
  --cost F:B         emulate: forward:backward milliseconds per stage op
  --trace            also write a Chrome trace per run (for plot.py gantt / memory)
  --set k=v          config override for every run (repeatable), e.g. --set parallel.recompute=true
  --bin PATH         the chimera binary (used to check each point before it is submitted);
                     default $CHIMERA_BIN, else build/cuda/bin/chimera on a cluster and
                     build/release/bin/chimera with --local and --cluster local
  --local            run on this machine with mpirun (the local twin) instead of sbatch
  --cluster NAME     daint (default): the sbatch template as written; local: submit the local
                     twin's sizes and emulated compute to the cluster of scripts/slurm-local
                     (partition debug, no constraint, CPU build, srun --mpi=pmix, 4 ranks per
                     node; needs SLURM_CONF, see `scripts/slurm-local env`)
  --time HH:MM:SS    Slurm time limit per job              --account A    Slurm account (-A)
  --partition P      Slurm partition                       --constraint C Slurm constraint
  --ranks-per-node R MPI ranks per node (sbatch --ntasks-per-node; default 1, one per GPU)
  --dry-run          print every sbatch (or mpirun) line instead of running it
  -h, --help         this help
HELP
}

# Defaults for a cluster study; `--local` (anywhere on the line) switches to the local twin's,
# `--cluster local` to the local twin's sizes submitted to scripts/slurm-local's cluster.
study_set_defaults() {
  local_mode=0 cluster=daint
  local prev=""
  for arg in "$@"; do
    [[ "$arg" == --local ]] && local_mode=1
    [[ "$prev" == --cluster ]] && cluster=$arg
    prev=$arg
  done
  [[ "$cluster" == daint || "$cluster" == local ]] || die "--cluster is '$cluster'; use daint or local"
  schemes="chimera,1f1b,gpipe,gems" B=1 steps=10 compute=real cost="" trace=0 dry_run=0
  time_limit="00:30:00" account="" partition="" constraint="" ranks_per_node=1 sets=()
  config="jobscripts/configs/gpt2-1.3b.toml" bin="${CHIMERA_BIN:-build/cuda/bin/chimera}"
  small_sizes=$local_mode
  if ((local_mode)) || [[ "$cluster" == local ]]; then
    small_sizes=1
    config="jobscripts/configs/local.toml" bin="${CHIMERA_BIN:-build/release/bin/chimera}"
    compute=emulate cost="10:20" steps=6 schemes="chimera,1f1b,gpipe"
  fi
  if [[ "$cluster" == local ]]; then
    # What the sbatch template takes from the environment (see its header).
    export CHIMERA_MODULES="" CHIMERA_BACKEND=cpu CHIMERA_SRUN_FLAGS=--mpi=pmix
    time_limit="00:05:00" partition=debug constraint="" ranks_per_node=${CHIMERA_SLURM_CPUS:-4}
  fi
  bin_from=""
  [[ -n "${CHIMERA_BIN:-}" ]] && bin_from=CHIMERA_BIN
  out="runs/$study_name"
}

# Parses the common options; a driver's own options are handled by its `study_own_option NAME
# VALUE` (returns 0 when it took the option with its value, 1 otherwise).
study_parse_options() {
  while (($#)); do
    case "$1" in
      --schemes) schemes="${2:?--schemes needs a list}"; shift 2 ;;
      -D) D="${2:?-D needs a value}"; shift 2 ;;
      -B) B="${2:?-B needs a value}"; shift 2 ;;
      --config) config="${2:?--config needs a file}"; shift 2 ;;
      --out) out="${2:?--out needs a folder}"; shift 2 ;;
      --steps) steps="${2:?--steps needs a value}"; shift 2 ;;
      --compute) compute="${2:?--compute needs real or emulate}"; shift 2 ;;
      --cost) cost="${2:?--cost needs F:B}"; shift 2 ;;
      --trace) trace=1; shift ;;
      --set) sets+=("${2:?--set needs section.key=value}"); shift 2 ;;
      --bin) bin="${2:?--bin needs a path}" bin_from=--bin; shift 2 ;;
      --local) shift ;;
      --cluster) shift 2 ;;
      --constraint) constraint="${2?--constraint needs a value}"; shift 2 ;;
      --ranks-per-node) ranks_per_node="${2:?--ranks-per-node needs a value}"; shift 2 ;;
      --time) time_limit="${2:?--time needs HH:MM:SS}"; shift 2 ;;
      --account) account="${2:?--account needs a name}"; shift 2 ;;
      --partition) partition="${2:?--partition needs a name}"; shift 2 ;;
      --dry-run) dry_run=1; shift ;;
      -h|--help) echo "$study_usage"; echo; study_common_help; exit 0 ;;
      *)
        if (($# >= 2)) && study_own_option "$1" "$2"; then shift 2
        else die "unknown argument '$1' (see $0 --help)"; fi ;;
    esac
  done
  [[ "$D" =~ ^[1-9][0-9]*$ ]] || die "-D is '$D'; it must be a positive whole number"
  [[ "$B" =~ ^[1-9][0-9]*$ ]] || die "-B is '$B'; it must be a positive whole number"
  [[ -f "$config" ]] || die "config '$config' does not exist (run from the repository root)"
  [[ "$ranks_per_node" =~ ^[1-9][0-9]*$ ]] ||
    die "--ranks-per-node is '$ranks_per_node'; it must be a positive whole number"
  if [[ "$cluster" == local && -z "${SLURM_CONF:-}" ]] && ((!dry_run)); then
    die "--cluster local submits to the cluster of scripts/slurm-local: run" \
        "scripts/slurm-local up, then eval \"\$(scripts/slurm-local env)\""
  fi
  # On this machine the binary must exist: the local twin and the cluster of scripts/slurm-local
  # run the build under test (a test passes its own as CHIMERA_BIN or --bin).
  if { ((local_mode)) || [[ "$cluster" == local ]]; } && ((!dry_run)) && [[ ! -x "$bin" ]]; then
    die "no chimera binary at '$bin' (from ${bin_from:-the default}); build it with" \
        "scripts/build release, or name it with --bin PATH or CHIMERA_BIN"
  fi
  planned=0 skipped=0 failed=0
}

# Splits a comma-separated list of positive integers into the array named $2.
study_int_list() {
  local -n into=$2
  IFS=, read -r -a into <<<"$1"
  local x
  for x in "${into[@]}"; do
    [[ "$x" =~ ^[1-9][0-9]*$ ]] || die "'$x' in '$1' is not a positive whole number"
  done
}

# Asks the binary whether the schedule exists: `chimera schedule` exits with status 2 and one
# line when it does not. Without a usable binary every point goes ahead and a job that cannot
# run reports why in its output.
study_check_schedule() {
  local scheme=$1 variant=$2 pipes=$3 w=$4 d=$5 n=$6 args message status=0
  [[ -x "$bin" ]] || return 0
  args=(schedule --scheme "$scheme" -D "$d" -N "$n" --format csv)
  [[ -n "$variant" ]] && args+=(--variant "$variant")
  ((pipes > 0)) && args+=(--pipes "$pipes")
  message=$("$bin" "${args[@]}" 2>&1 >/dev/null) || status=$?
  if ((status == 2)); then
    echo "skip $scheme${variant:+ $variant} W=$w D=$d N=$n: ${message#error: }" >&2
    return 1
  fi
}

# One point of the study: submits the sbatch template, or runs the local twin with mpirun.
study_point() {
  local spec=$1 W=$2 d=$3 n=$4 scheme variant pipes
  IFS=: read -r scheme variant pipes <<<"$spec"
  pipes=${pipes:-0}
  if ! study_check_schedule "$scheme" "$variant" "$pipes" "$W" "$d" "$n"; then
    skipped=$((skipped + 1))
    return 0
  fi
  local point=(--study "$study_name" --scheme "$scheme" -W "$W" -D "$d" -N "$n" -B "$B"
               --config "$config" --out "$out" --steps "$steps" --compute "$compute")
  [[ -n "$variant" ]] && point+=(--variant "$variant")
  ((pipes > 0)) && point+=(--pipes "$pipes")
  [[ -n "$cost" ]] && point+=(--cost "$cost")
  ((trace)) && point+=(--trace)
  local s
  for s in ${sets[@]+"${sets[@]}"}; do point+=(--set "$s"); done
  planned=$((planned + 1))

  local name
  name=$(jobscripts/run_point --launcher mpirun "${point[@]}" --name-only)
  if ((local_mode)); then
    if ((dry_run)); then
      jobscripts/run_point --launcher mpirun "${point[@]}" --bin "$bin" --dry-run
    else
      mkdir -p "$out"
      printf '%-48s ' "$name"
      if jobscripts/run_point --launcher mpirun "${point[@]}" --bin "$bin" >"$out/$name.out" 2>&1
      then study_summary_line <"$out/$name.metrics.jsonl"
      else failed=$((failed + 1)); echo "FAILED (see $out/$name.out)"; fi
    fi
    return 0
  fi
  local ranks=$((W * d))
  local submit=(sbatch --nodes="$(((ranks + ranks_per_node - 1) / ranks_per_node))"
                --ntasks="$ranks" --ntasks-per-node="$((ranks < ranks_per_node ? ranks : ranks_per_node))"
                --job-name="$name" --output="$out/$name.%j.out" --time="$time_limit"
                --chdir="$PWD")
  [[ -n "$account" ]] && submit+=(--account="$account")
  [[ -n "$partition" ]] && submit+=(--partition="$partition")
  # An empty --constraint clears the template's --constraint=gpu; cores per rank likewise.
  [[ "$cluster" == local ]] && submit+=(--constraint= --cpus-per-task=1)
  [[ -n "$constraint" ]] && submit+=(--constraint="$constraint")
  submit+=(jobscripts/daint/chimera.sbatch "${point[@]}")
  [[ "$bin" != build/cuda/bin/chimera ]] && submit+=(--bin "$bin")
  if ((dry_run)); then
    echo "${submit[*]}"
  else
    mkdir -p "$out"
    "${submit[@]}"
  fi
}

# "12.3 ms/iter": the median iteration of a local run after its first (warm-up) step.
study_summary_line() {
  awk -F'"iter_ms": ' 'NF > 1 && NR > 1 { split($2, a, ","); ms[n++] = a[1] + 0 } END {
    if (n == 0) { print "no timed steps"; exit }
    for (i = 1; i < n; i++) for (j = i; j > 0 && ms[j - 1] > ms[j]; j--) {
      t = ms[j]; ms[j] = ms[j - 1]; ms[j - 1] = t }
    printf "%8.2f ms/iter\n", n % 2 ? ms[int(n / 2)] : (ms[n / 2 - 1] + ms[n / 2]) / 2 }'
}

study_finish() {
  local verb=submitted
  ((local_mode)) && verb=ran
  ((dry_run)) && verb="would submit"
  ((dry_run && local_mode)) && verb="would run"
  local failures=""
  ((failed > 0)) && failures=", $failed FAILED"
  echo "$study_name: $verb $planned point(s), skipped $skipped$failures; collect with" \
       "/usr/bin/python3 analysis/collect.py $out" >&2
  ((failed == 0))
}
