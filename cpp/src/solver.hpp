// Multiple-shooting optimal-estimation problem and solver in C++ (mirror of mcoe_ros.ocp.{problem, riccati,
// solver} for the estimator's model: a multibody state, process noise on the velocities (B = G exactly), the
// multiple-shooting rollout). Knots 0..N; the solver owns its workspace; every allocation happens when the problem
// is (re)sized, none per iteration. Linearisations and line-search trials run in parallel over the knots.
#pragma once

#include <atomic>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "interval.hpp"
#include "parametrization.hpp"

namespace mcoe {

// consider parameters b of the consider analysis: the IMU biases (gyro (3,), accelerometer (3,)) of the readings that
// do not estimate theirs and the orientation reading's rotation offset (3,) (mcoe_ros.multibody.interval.IMU_CONSIDER,
// imu_bias_jacobian)
constexpr int kConsider = 9;

struct Prior {
  Vec x_bar, theta_bar;  // (nx,), (ntheta,)
  Mat H;                 // (ndx + ntheta)^2, symmetric
  Vec g;                 // (ndx + ntheta,)
  Mat G;                 // (ndx + ntheta, kConsider) dg/db of the marginalised past; empty = zeros
};

struct Options {
  std::string arrival = "auto";  // auto | schur | nullspace
  double rank_tol = 1e-9;
  int max_iter = 100;
  double max_time = -1.0;  // s, < 0 = none
  double tol_stop = 1e-12;
  double tol_gap = 1e-9;
  double reg_init = 0.0, reg_min = 0.0, reg_base = 1e-9, reg_max = 1e12, reg_factor = 10.0;
  double alpha_min = 1.0 / 1024.0;
  double armijo = 1e-4;
  int nonmonotone_memory = 2;
  double nu_init = 1.0;
  bool refresh_noise = true;
  // compute the direction at the returned point when the budget is spent (only the convergence flag and the arrival
  // Hessian use it); false: a real-time iteration saves that backward pass
  bool final_direction = true;
  // consider analysis of the IMU biases (Knot::Gr, Prior::G, Solver::considerSensitivity); false: not computed
  bool consider = true;
  int threads = 1;
  // knots (interval data of their models) that a shift dropped and no new knot took, kept for later shifts: a gait
  // returns to its contact phases, whose new knots then take them instead of allocating (< 0: one window, N + 1;
  // 0: none, the dropped knots without a match are freed)
  int spare_knots = 0;
};

struct IterationLog {
  int iteration;
  double cost, merit, gap, step, reg, stop, time;
  std::string arrival;
};

struct Result {
  bool converged = false;
  int iterations = 0;
  double cost = 0.0, gap = 0.0;
  std::string status;
  std::vector<IterationLog> log;
  Mat arrival_hessian;  // empty if no direction was computed
};

// wall time (s) of the solver's phases, accumulated until reset by the caller (profiling: benchmarks/profile_tick.py)
struct Timings {
  double linearize = 0.0;    // solve(): the first linearisation (knots a shift kept are not linearised again)
  double direction = 0.0;    // Riccati backward pass + arrival + forward sweep
  double line_search = 0.0;  // trial rollouts
  double relinearize = 0.0;  // solve(): linearisations after accepted steps
  double shift = 0.0;        // shift(): marginal prior, knot recycling, rollout of the new knots
  double covariance = 0.0;   // terminalCovariance()
  int knots_allocated = 0;   // knots whose interval data were allocated (problem set-up; a shift recycles)
};

// a row of an (n, nv) noise-information matrix or a vector, without a copy
using NoiseRow = Eigen::Ref<const Vec, 0, Eigen::InnerStride<>>;

struct Knot {
  std::shared_ptr<const IntervalModel> model;
  std::unique_ptr<IntervalData> data, trial;
  // process-noise information (nv, nv): diag(w0), or with the torque-noise model (Sigma_tau + diag(w0)^-1)^-1
  // (refreshNoise); w0 (nv,): the interval's constant (diagonal) information as set by setProblem / shift
  Mat W;
  Vec w0;
  Mat Fth, Rth, A, C;          // linearisation
  // A's and C's configuration rows factored (joint-block-diagonal (nv, nv) each): A = [M1 0; 0 0] + [D; I] A_v and
  // C = [D; I] C_v with A_v, C_v their velocity rows (q' = q (+) dt v'): M1 = g jq, D = g jv (IntervalData jq, jv)
  Mat M1, D;
  Vec gap, fbar, y;
  // the measurements' Gauss-Newton blocks over (dx_k, dtheta) at the linearisation, J = [Rx Rth]: Hr = J^T J
  // (symmetric, (ndx + ntheta)^2), gr = J^T r; formed once per linearisation (in the parallel knot loop) and read by
  // the Riccati sweep and the marginalisation (a knot kept by a shift is not formed again)
  Mat Hr;
  Vec gr;
  Mat Gr;  // (ndx + ntheta, kConsider) d gr / db = J^T dr/db (consider analysis)
  // noise-coupled knot (IntervalModel::noise_coupled, not terminal): the residual is r + Rw w (d.r holds it at the
  // linearisation); Rw's Gauss-Newton products formed with Hr: Lw = Rw^T r (nv,), Lwz = Rw^T J (nv, ndx + ntheta),
  // Lww = Rw^T Rw (nv, nv), Lwb = Rw^T dr/db (nv, kConsider); empty otherwise
  Vec Lw;
  Mat Lwz, Lww, Lwb;
  // parametric noise (Solver::setTorqueNoise with parametric): the noise cost's theta terms at the knot's w (Python
  // Knot.set_noise_derivative): lth (ntheta,), Lwth (nv, ntheta), Lthth (ntheta, ntheta); for the line-search trials
  // dW_i = W (X_i + X_i^T) W with X_i = Z C_i R (IntervalModel::noiseCovarianceFactors): nZ, nR and the mixings C_i
  // (mix_b (36, ntheta): the payload blocks, column-major; mix_j (nj, ntheta): the joints' diagonals); has_dW false
  // until refreshNoise sets them
  Vec lth;
  Mat Lwth, Lthth, nZ, nR, mix_b, mix_j;
  bool has_dW = false;
  bool coupled() const { return !terminal && model->noise_coupled; }
  // preallocated scratch (no allocation per knot per iteration; linearizeKnot's matrices are per thread)
  Vec gw, y_try, c_try, next, ww;  // ww: W w
  Vec zu, ru;                        // parametric noise trials: Z^T W w, R W w
  double refresh_delta = 0.0;       // refreshNoise: the change of the knot's noise cost
  bool terminal = false;
  bool forward_ready = false;  // data holds calc() at (xs[k], pi) (the accepted trial): calcDiff skips the forward
  bool linearized = false;     // data/A/C/fbar/gap/Fth/Rth/cost hold the linearisation at (xs[k], xs[k+1], ws[k], theta)
  double cost = 0.0;           // measurement + noise cost of the last evaluation
  double trial_cost = 0.0, trial_gap = 0.0;
};

class FactorizationError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Solver {
 public:
  Solver(const Parametrization& param, const Options& options);

  // ---- problem
  // noise_info (N, nv): row k the diagonal information of interval k's velocity noise (per-knot: e.g. looser on a
  // touch-down transient, mcoe_ros.estimation.builder)
  void setProblem(const std::vector<std::shared_ptr<const IntervalModel>>& running,
                  const std::shared_ptr<const IntervalModel>& terminal, const Prior& prior, const Mat& noise_info);
  void setKnot(int k, const Vec& u, const Vec& z);  // empty vectors leave the value
  // state-dependent velocity noise (empty = off): covariance per interval dt^2 (da/dtau) diag(torque_std^2)
  // (da/dtau)^T + diag(w0)^-1 (the interval's constant noise), refreshed at the first linearisation of a solve
  // parametric: the covariance's derivative in theta enters the linearisation (the noise cost's theta terms, Python
  // ocp.problem "Parametric noise"), refreshed at every linearisation
  void setTorqueNoise(const Vec& torque_std, bool parametric = false);
  void setGuess(const std::vector<Vec>& xs, const std::vector<Vec>& ws, const Vec& theta);
  int N() const { return static_cast<int>(knots_.size()) - 1; }
  int spareCount() const { return static_cast<int>(spare_.size()); }
  int ndx() const { return ndx_; }
  int nw() const { return nv_; }
  int ntheta() const { return param_.size(); }
  Timings timings;
  Prior prior;  // read freely; change it with setPrior (the stored marginals depend on it)
  void setPrior(const Prior& p) { prior = p; marg_valid_ = false; }
  Options options;

  // ---- solver
  Result solve(int max_iter);
  // thread-safe stop request: solve() stops before its next line search (status "stopped", the returned point is
  // the last linearised one); the request stays set until clearStop()
  void requestStop() { stop_requested_.store(true); }
  void clearStop() { stop_requested_.store(false); }
  bool stopRequested() const { return stop_requested_.load(); }
  // linearise at the current estimate; returns the total cost. reuse: knots whose linearisation is still that of the
  // current point (kept by a shift) are not linearised again
  double calcDiff(bool reuse = false);
  // forget every linearisation and the stored marginals (after xs / ws / theta / prior were changed from outside)
  void invalidate();
  void computeDirection(double reg, double& d1, double& d2, std::string& method);
  double tryStep(double alpha, double& gap_l1);
  void shift(int k, const std::vector<std::shared_ptr<const IntervalModel>>& running,
             const std::shared_ptr<const IntervalModel>& terminal, const std::vector<Vec>& us,
             const std::vector<Vec>& zs, const Vec& u_terminal, const Vec& z_terminal, const Mat& noise_info);
  Prior marginalPrior(int k, bool relinearize);
  // (ndx + ntheta)^2 over (dx_N, dtheta): inverse of the GN information (pseudo-inverse if ill-conditioned); also
  // sets considerSensitivity
  Mat terminalCovariance();
  // (ndx + ntheta, kConsider) d(x_N, theta)/db = -cov dg/db of the last terminalCovariance (consider analysis)
  Mat considerSensitivity;
  // seconds spent in the Pinocchio calls alone of one iteration at the current estimate (every knot's
  // linearisation + one line-search trial), summed over the knots on one thread: the floor of an iteration
  double pinocchioFloor();

  // ---- state and results
  std::vector<Vec> xs, ws;
  Vec theta, dtheta, pi;
  Mat dpi;
  Mat dx, dw;  // (N+1, ndx), (N, nw)
  const Knot& knot(int k) const { return knots_[k]; }
  Knot& knot(int k) { return knots_[k]; }

 private:
  void allocate();
  void linearizeKnot(int k);
  void backwardPass(double reg);
  void arrival(double reg, std::string& method);
  double priorLinearize(const Vec& x0, const Vec& th, Vec& grad, Mat& hess) const;
  Mat priorSensitivity(const Vec& x0) const;  // d(priorLinearize's grad)/db = T^T prior.G (zeros if empty)
  double priorCost(const Vec& x0, const Vec& th) const;
  void rolloutGuess(int start);
  void refreshNoise(double& cost);
  // a knot with constant noise information w0 (nv,) (the terminal knot: ones, unused)
  Knot makeKnot(const std::shared_ptr<const IntervalModel>& m, const NoiseRow& w0, bool terminal);
  void setNoise(Knot& kn, const NoiseRow& w0) const;  // w0 and W = diag(w0), in place
  // G: dg/db, mapped as g without its constant terms
  void marginalizeKnot(const Knot& knot, const Vec& w, Mat& h, Vec& g, Mat& G);
  Prior marginalRecursion(int k, bool relinearize, bool store);
  // state manifold (free flyer + joints) of the first model
  void integrate(const Eigen::Ref<const Vec>& x, const Eigen::Ref<const Vec>& dx, Eigen::Ref<Vec> out) const;
  void difference(const Eigen::Ref<const Vec>& x0, const Eigen::Ref<const Vec>& x1, Eigen::Ref<Vec> out) const;

  Parametrization param_;
  std::vector<Knot> knots_;
  std::vector<Knot> spare_;  // Options::spare_knots: dropped knots kept for reuse, oldest first
  std::shared_ptr<const IntervalModel> state_model_;
  int nq_ = 0, nv_ = 0, ndx_ = 0, nx_ = 0;
  Vec torque_std_;
  bool parametric_noise_ = false;
  Mat noise_cov_;  // refreshNoise scratch (nv, nv)
  // the parametric noise terms of a knot at its w (refreshNoise): cov = W^-1, and dSigma/dpi in the factored form
  // of IntervalModel::noiseCovarianceFactors (Z, R)
  void setNoiseDerivative(Knot& kn, const Vec& w, const Mat& cov, const Mat& Z, const Mat& R) const;
  // Riccati workspace
  std::vector<Vec> Vx_, Vth_, k_;
  std::vector<Mat> Vxx_, Vxth_, Vthth_, K_, P_;
  Mat xi_;
  std::vector<Vec> xs_try_, ws_try_;
  Vec theta_try_, pi_try_, step_;  // step_: a trial's state step alpha dx_k (ndx)
  Vec dx0_;
  Mat arrival_hess_;
  Vec arrival_grad_, prior_grad_;
  Mat prior_hess_;
  bool linearized_ = false;  // the knots hold the linearisation of (xs, ws, theta)
  // forward marginalisation (h, g) after knots 0..j-1, j = 1..size, at the current linearisation (terminalCovariance
  // stores them; the next shift takes its prior from them instead of repeating the recursion)
  std::vector<Mat> marg_h_;
  std::vector<Vec> marg_g_;
  std::vector<Mat> marg_G_;
  bool marg_valid_ = false;
  // marginalizeKnot scratch (sized on first use)
  Mat mk_ainv_, mk_tq_, mk_p_, mk_hy_, mk_mw_, mk_lw_, mk_rhs_, mk_s_, mk_hr_;
  Vec mk_t0_, mk_gy_, mk_m0_, mk_hz0_, mk_sw_, mk_dw0_;
  Mat mk_gby_, mk_z_, mk_jw_, mk_lm_, mk_mt_;  // mk_z_ (m, m), mk_jw_ / mk_lm_ (nv, m), mk_mt_ (m, ntheta)
  Eigen::LLT<Mat> mk_llt_;
  std::atomic<bool> stop_requested_{false};
};

}  // namespace mcoe
