// The command-line shape of `urnic stats|fault|capture` (CLI11); the work is
// in observe.cpp.
#include <CLI/CLI.hpp>

#include <memory>

#include "tools/cli/observe.hpp"

namespace urnic::tools {

namespace {

void add_daemon_options(CLI::App& cmd, DaemonOptions& d) {
  cmd.add_option("-d,--device", d.device, "device (default urnic0)");
  cmd.add_option("--runtime-dir", d.runtime_dir, "urnicd's runtime directory (default: as the shim finds it)");
}

// Adds --NAME taking a value into `*value`; the callback copies it into the
// optional only when given.
template <class T>
CLI::Option* add_optional(CLI::App& cmd, const std::string& name, T& value, const std::string& help) {
  return cmd.add_option(name, value, help);
}

}  // namespace

void register_observe_commands(CLI::App& app, int& status) {
  // stats
  auto stats = std::make_shared<StatsOptions>();
  auto* s = app.add_subcommand("stats", "Per-device and per-QP counters of urnicd");
  add_daemon_options(*s, stats->daemon);
  s->add_flag("--json", stats->json, "machine-readable output");
  s->add_flag("--all", stats->all, "text: also per-QP counters that are zero");
  s->add_option("--watch", stats->watch_ms,
                "a reading every MS ms until interrupted: per QP its DCQCN rate, send rate, CE marks, CNPs, "
                "cuts, retransmissions (--json: one object per line)")
      ->check(CLI::Range(std::uint64_t{10}, std::uint64_t{3'600'000}));
  s->add_option("--count", stats->count, "with --watch: stop after N readings");
  s->callback([stats, &status] { status = run_stats(*stats); });

  // fault
  struct FaultArgs {
    FaultOptions opts;
    double loss = 0, dup = 0, reorder = 0, corrupt = 0, ecn = 0;
    std::uint64_t delay_us = 0, reorder_delay_us = 0, seed = 1;
    std::uint32_t qpn = 0;
    CLI::Option *o_loss = nullptr, *o_dup = nullptr, *o_reorder = nullptr, *o_corrupt = nullptr,
                *o_ecn = nullptr, *o_delay = nullptr, *o_rdelay = nullptr, *o_seed = nullptr, *o_qp = nullptr;
  };
  auto fa = std::make_shared<FaultArgs>();
  auto* f = app.add_subcommand(
      "fault", "Fault injection on a device's TX path (no options: show the settings)");
  add_daemon_options(*f, fa->opts.daemon);
  auto fraction = CLI::Range(0.0, 1.0);
  fa->o_loss = add_optional(*f, "--loss", fa->loss, "probability a frame is dropped")->check(fraction);
  fa->o_dup = add_optional(*f, "--dup", fa->dup, "probability a frame is sent twice")->check(fraction);
  fa->o_reorder =
      add_optional(*f, "--reorder", fa->reorder, "probability a frame is held back (later ones overtake it)")
          ->check(fraction);
  fa->o_corrupt =
      add_optional(*f, "--corrupt", fa->corrupt, "probability one bit of BTH..ICRC is flipped")->check(fraction);
  fa->o_ecn = add_optional(*f, "--ecn", fa->ecn,
                           "probability an ECN-capable RoCE v2 frame is marked Congestion Experienced")
                  ->check(fraction);
  fa->o_delay = add_optional(*f, "--delay-us", fa->delay_us, "delay every frame by N microseconds");
  fa->o_rdelay = add_optional(*f, "--reorder-delay-us", fa->reorder_delay_us,
                              "how long --reorder holds a frame back (default 20)");
  fa->o_seed = add_optional(*f, "--seed", fa->seed, "random seed (default 1)");
  fa->o_qp = add_optional(*f, "--qp", fa->qpn, "only frames sent by this QPN");
  auto* clear = f->add_flag("--clear", fa->opts.clear, "stop injecting faults");
  for (CLI::Option* o : {fa->o_loss, fa->o_dup, fa->o_reorder, fa->o_corrupt, fa->o_ecn, fa->o_delay, fa->o_rdelay,
                         fa->o_seed, fa->o_qp})
    clear->excludes(o);
  f->callback([fa, &status] {
    FaultOptions& o = fa->opts;
    if (fa->o_loss->count() != 0) o.loss = fa->loss;
    if (fa->o_dup->count() != 0) o.duplicate = fa->dup;
    if (fa->o_reorder->count() != 0) o.reorder = fa->reorder;
    if (fa->o_corrupt->count() != 0) o.corrupt = fa->corrupt;
    if (fa->o_ecn->count() != 0) o.ecn = fa->ecn;
    if (fa->o_delay->count() != 0) o.delay_us = fa->delay_us;
    if (fa->o_rdelay->count() != 0) o.reorder_delay_us = fa->reorder_delay_us;
    if (fa->o_seed->count() != 0) o.seed = fa->seed;
    if (fa->o_qp->count() != 0) o.qpn = fa->qpn;
    status = run_fault(o);
  });

  // capture
  auto cap = std::make_shared<CaptureOptions>();
  auto* c = app.add_subcommand("capture",
                               "Write every frame the device sends and receives to a pcap "
                               "(until Ctrl-C or -c frames); no -w: show the capture state");
  add_daemon_options(*c, cap->daemon);
  auto* w = c->add_option("-w,--write", cap->path, "pcap file to write (urnicd writes it)");
  c->add_option("-c,--count", cap->count, "stop after this many frames");
  c->add_flag("--stop", cap->stop, "stop the device's capture (e.g. one the config started)")->excludes(w);
  c->callback([cap, &status] { status = run_capture(*cap); });
}

}  // namespace urnic::tools
