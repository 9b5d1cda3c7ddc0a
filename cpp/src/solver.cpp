#include "solver.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <stdexcept>

#include <pinocchio/algorithm/joint-configuration.hpp>

namespace mcoe {

namespace pin = pinocchio;

namespace {

double elapsed(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

Mat sym(const Mat& m) { return 0.5 * (m + m.transpose()); }

bool allFinite(const Mat& m) { return m.allFinite(); }

// Cholesky that reports failure like scipy's cho_factor (non-positive pivot) and non-finite factors
void cholesky(Eigen::LLT<Mat>& llt, const Mat& m, const char* what) {
  llt.compute(m);
  if (llt.info() != Eigen::Success || !llt.matrixLLT().allFinite()) throw FactorizationError(what);
}

// A knot's failure inside a parallel loop, rethrown after it in knot order: a numerical one (FactorizationError,
// which Python sees as numpy.linalg.LinAlgError: the estimator holds the tick) keeps its type, any other (a bug, a
// wrong size) stays a std::runtime_error
struct KnotError {
  std::string what;
  bool numerical = false;
  void record(const std::exception& e) {
    what = e.what();
    numerical = dynamic_cast<const FactorizationError*>(&e) != nullptr;
  }
  void rethrow(int k) const {
    if (what.empty()) return;
    const std::string msg = "knot " + std::to_string(k) + ": " + what;
    if (numerical) throw FactorizationError(msg);
    throw std::runtime_error(msg);
  }
};

// Basis Y of the complement of the numerical nullspace of V (Jacobi-scaled eigen-decomposition, see Python
// mcoe_ros.ocp.riccati.range_basis); returns the null dimension
int rangeBasis(const Mat& v, double tol, Mat& y, Vec& lam) {
  const int n = static_cast<int>(v.rows());
  const Vec diag = v.diagonal();
  const double dmax = n ? diag.maxCoeff() : 0.0;
  std::vector<int> idx;
  if (dmax > 0.0)
    for (int i = 0; i < n; ++i)
      if (diag[i] > tol * dmax) idx.push_back(i);
  if (idx.empty()) {
    y.resize(n, 0);
    lam.resize(0);
    return n;
  }
  const int m = static_cast<int>(idx.size());
  Vec inv_sqrt(m);
  Mat scaled(m, m);
  for (int i = 0; i < m; ++i) inv_sqrt[i] = 1.0 / std::sqrt(diag[idx[i]]);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < m; ++j) scaled(i, j) = v(idx[i], idx[j]) * inv_sqrt[i] * inv_sqrt[j];
  Eigen::SelfAdjointEigenSolver<Mat> es(sym(scaled));
  const Vec& ev = es.eigenvalues();
  const double cut = tol * std::max(ev[m - 1], 0.0);
  std::vector<int> keep;
  for (int i = 0; i < m; ++i)
    if (ev[i] > cut) keep.push_back(i);
  y.setZero(n, static_cast<int>(keep.size()));
  lam.resize(static_cast<int>(keep.size()));
  for (size_t c = 0; c < keep.size(); ++c) {
    lam[c] = ev[keep[c]];
    for (int i = 0; i < m; ++i) y(idx[i], c) = inv_sqrt[i] * es.eigenvectors()(i, keep[c]);
  }
  return n - static_cast<int>(keep.size());
}

Mat pinvSym(const Mat& m, double rcond) {
  Eigen::SelfAdjointEigenSolver<Mat> es(sym(m));
  const Vec& ev = es.eigenvalues();
  const double cut = rcond * ev.cwiseAbs().maxCoeff();
  Vec inv(ev.size());
  for (int i = 0; i < ev.size(); ++i) inv[i] = std::abs(ev[i]) > cut ? 1.0 / ev[i] : 0.0;
  return es.eigenvectors() * inv.asDiagonal() * es.eigenvectors().transpose();
}

// Riccati sweep of the knots n-1..0 (the terminal knot's value function is in Vxx[n] ...). NV: the number of
// velocities when known at compile time (the state tangent is 2 NV, the noise acts on the velocities only: B = G =
// [0; I]), Eigen::Dynamic otherwise; theta's size stays dynamic. The workspace is sized once per sweep.
template <int NV>
void riccatiSweep(const PinModel& pm, const std::vector<Knot>& knots, const std::vector<Vec>& ws, int nv, int nth,
                  double reg, std::vector<Vec>& Vx, std::vector<Vec>& Vth, std::vector<Mat>& Vxx,
                  std::vector<Mat>& Vxth, std::vector<Mat>& Vthth, std::vector<Vec>& kk, std::vector<Mat>& KK,
                  std::vector<Mat>& PP) {
  constexpr int NX = NV == Eigen::Dynamic ? Eigen::Dynamic : 2 * NV;
  using Dyn = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic>;
  using MatXX = Eigen::Matrix<double, NX, NX>;
  using MatXV = Eigen::Matrix<double, NX, NV>;
  using MatVV = Eigen::Matrix<double, NV, NV>;
  using MatVX = Eigen::Matrix<double, NV, NX>;
  using MatXT = Eigen::Matrix<double, NX, Eigen::Dynamic>;
  using MatVT = Eigen::Matrix<double, NV, Eigen::Dynamic>;
  using VecX = Eigen::Matrix<double, NX, 1>;
  using VecV = Eigen::Matrix<double, NV, 1>;
  const int nx = 2 * nv, n = static_cast<int>(knots.size()) - 1;
  VecX vxp(nx), qx(nx);
  VecV qw(nv), kv(nv);
  Vec vthp(nth), qth(nth);
  MatXX va(nx, nx), qxx(nx, nx);
  MatXV qxw(nx, nv);
  MatVV qww(nv, nv);
  MatVX kx(nv, nx);
  MatXT vxxc(nx, nth), vc(nx, nth), qxth(nx, nth);
  MatVT qwth(nv, nth), pt(nv, nth);
  Dyn cv(nth, nth), qthth(nth, nth);
  Eigen::LLT<MatVV> llt(nv);
  MatVX xw(nv, nx);  // L^-1 Q_wx with Q_ww = L L^T
  MatVT xt(nv, nth);  // L^-1 Q_wth
  // with A = [M1 0; 0 0] + [D; I] A_v, C = [D; I] C_v (Knot): vb = Vxx [D; I], bt = [D; I]^T (Vxx A)
  MatXV vb(nx, nv), vm(nx, nv);
  MatVX bt(nv, nx);
  MatVV mt(nv, nv);
  MatVT ct(nv, nth), ct1(nv, nth);
  constexpr int NVc = NV == Eigen::Dynamic ? Eigen::Dynamic : NV;
  for (int k = n - 1; k >= 0; --k) {
    const Knot& kn = knots[k];
    const Eigen::Map<const MatXX> vxx(Vxx[k + 1].data(), nx, nx), A(kn.A.data(), nx, nx);
    const Eigen::Map<const MatXT> vxth(Vxth[k + 1].data(), nx, nth), C(kn.C.data(), nx, nth);
    const Eigen::Map<const MatVV> W(kn.W.data(), nv, nv);
    const Eigen::Map<const VecX> fbar(kn.fbar.data(), nx);
    vxp = Eigen::Map<const VecX>(Vx[k + 1].data(), nx);
    vxp.noalias() += vxx * fbar;
    vthp = Vth[k + 1];
    vthp.noalias() += vxth.transpose() * fbar;
    const auto Av = A.template bottomRows<NVc>(nv);
    const auto Cv = C.bottomRows(nv);
    // Vxx A = vb A_v + [Vxx_(:,q) M1, 0], Vxx C = vb C_v: about half the flops of the dense products
    jointBlockProductRight(pm, vxx.leftCols(nv), kn.D, vb);
    vb += vxx.template rightCols<NVc>(nv);
    va.noalias() = vb * Av;
    jointBlockProductRight(pm, vxx.leftCols(nv), kn.M1, vm);
    va.leftCols(nv) += vm;
    vxxc.noalias() = vb * Cv;
    vc = vxth + vxxc;
    qx = kn.gr.head(nx);
    qx.noalias() += A.transpose() * vxp;
    qw.noalias() = W * ws[k];
    qw += vxp.template segment<NV == Eigen::Dynamic ? Eigen::Dynamic : NV>(nv, nv);
    qth = kn.gr.tail(nth) + vthp;
    qth.noalias() += C.transpose() * vxp;
    // Q_xx, Q_xx - Q_xw Q_ww^-1 Q_wx and V_xx are symmetric: their lower triangle is computed, V_xx mirrored
    qxx = kn.Hr.topLeftCorner(nx, nx);
    // A^T (Vxx A) = A_v^T bt + [M1^T (Vxx A)_q; 0]: the M1 term on the configuration rows' lower triangle only
    jointBlockProductT(pm, kn.D, va.topRows(nv), bt);
    bt += va.template bottomRows<NVc>(nv);
    qxx.template triangularView<Eigen::Lower>() += Av.transpose() * bt;
    jointBlockProductT(pm, kn.M1, va.topLeftCorner(nv, nv), mt);
    qxx.topLeftCorner(nv, nv) += mt;
    // A^T Vxx B = (Vxx A)^T's velocity columns (Vxx symmetric)
    qxw = va.template bottomRows<NV == Eigen::Dynamic ? Eigen::Dynamic : NV>(nv).transpose();
    qww = W + vxx.template bottomRightCorner<NV == Eigen::Dynamic ? Eigen::Dynamic : NV,
                                             NV == Eigen::Dynamic ? Eigen::Dynamic : NV>(nv, nv);
    qxth = kn.Hr.topRightCorner(nx, nth);
    jointBlockProductT(pm, kn.D, vc.topRows(nv), ct);
    ct += vc.bottomRows(nv);
    qxth.noalias() += Av.transpose() * ct;
    jointBlockProductT(pm, kn.M1, vc.topRows(nv), ct1);
    qxth.topRows(nv) += ct1;
    qwth = vc.template bottomRows<NV == Eigen::Dynamic ? Eigen::Dynamic : NV>(nv);
    cv.noalias() = C.transpose() * vxth;
    qthth = kn.Hr.bottomRightCorner(nth, nth) + Vthth[k + 1] + cv + cv.transpose();
    qthth.noalias() += C.transpose() * vxxc;
    if (kn.coupled()) {  // the residual r + Rw w depends on the noise: l_w, l_ww, l_xw, l_wtheta
      qw += kn.Lw;
      qww += kn.Lww;
      qxw += kn.Lwz.leftCols(nx).transpose();
      qwth += kn.Lwz.rightCols(nth);
    }
    if (kn.has_dW) {  // parametric noise: the noise cost's theta terms
      qth += kn.lth;
      qwth += kn.Lwth;
      qthth += kn.Lthth;
    }
    if (reg > 0.0) qww.diagonal().array() += reg;
    llt.compute(qww);
    if (llt.info() != Eigen::Success || !llt.matrixLLT().allFinite())
      throw FactorizationError("Q_ww not positive definite");
    kv = llt.solve(qw);
    xw = llt.matrixL().solve(qxw.transpose());
    kx = llt.matrixU().solve(xw);
    xt = llt.matrixL().solve(qwth);
    pt = llt.matrixU().solve(xt);
    if (!kv.allFinite() || !kx.allFinite() || !pt.allFinite()) throw FactorizationError("non-finite policy");
    kk[k] = kv;
    KK[k] = kx;
    PP[k] = pt;
    Vx[k] = qx;
    Vx[k].noalias() -= qxw * kv;
    Vth[k] = qth;
    Vth[k].noalias() -= qwth.transpose() * kv;
    qxx.template selfadjointView<Eigen::Lower>().rankUpdate(xw.transpose(), -1.0);
    Eigen::Map<MatXX> vxx_k(Vxx[k].data(), nx, nx);
    vxx_k.template triangularView<Eigen::Lower>() = qxx;
    vxx_k.template triangularView<Eigen::StrictlyUpper>() = qxx.transpose();
    Vxth[k] = qxth;
    Vxth[k].noalias() -= xw.transpose() * xt;
    qthth.noalias() -= xt.transpose() * xt;
    Vthth[k] = 0.5 * (qthth + qthth.transpose());
  }
}

// the measurements' Gauss-Newton blocks of a linearised knot: Hr = J^T J, gr = J^T r with J = [Rx Rth]. The joint
// encoder rows are -W on their joints' columns (no pi part): their W^T W is added to that diagonal block; the other
// measurements' rows are gathered in jr for one symmetric rank update
// (jr: the thread's scratch, at least (nr, ndx + ntheta))
void measurementGram(Knot& kn, const IntervalData& d, Mat& jr, bool consider) {
  using MK = MeasurementSpec::Kind;
  const IntervalModel& m = *kn.model;
  const int ndx = static_cast<int>(d.Rx.cols()), nth = static_cast<int>(kn.Rth.cols());
  kn.Hr.setZero();
  kn.gr.setZero();
  kn.Gr.setZero();
  int rows = 0;
  for (size_t i = 0; i < m.measurements.size(); ++i) {
    const MeasurementSpec& s = m.measurements[i];
    const int ro = m.r_offsets[i], n = s.nr;
    if (s.kind == MK::JointPosition || s.kind == MK::JointVelocity) {
      const int c = s.kind == MK::JointPosition ? m.nv - m.nj : ndx - m.nj;
      kn.Hr.block(c, c, n, n) += s.WtW;
      kn.gr.segment(c, n).noalias() -= s.W.transpose() * d.r.segment(ro, n);
      continue;
    }
    jr.middleRows(rows, n).leftCols(ndx) = d.Rx.middleRows(ro, n);
    jr.middleRows(rows, n).rightCols(nth) = kn.Rth.middleRows(ro, n);
    const bool offset = s.kind == MK::Orientation ||
                        ((s.kind == MK::Gyro || s.kind == MK::SpecificForce) && s.bias_start < 0);
    if (consider && offset) {
      // consider analysis: an unestimated bias b adds to the reading, r = W (z - h): dr/db = W on these rows; the
      // orientation reading's offset R_meas exp(d): dr/dd = W Jlog3 = W at a small residual
      const int c = s.kind == MK::Gyro ? 0 : (s.kind == MK::SpecificForce ? 3 : 6);
      kn.Gr.block(0, c, ndx, 3).noalias() += d.Rx.middleRows(ro, n).transpose() * s.W;
      kn.Gr.block(ndx, c, nth, 3).noalias() += kn.Rth.middleRows(ro, n).transpose() * s.W;
    }
    kn.gr.head(ndx).noalias() += d.Rx.middleRows(ro, n).transpose() * d.r.segment(ro, n);
    kn.gr.tail(nth).noalias() += kn.Rth.middleRows(ro, n).transpose() * d.r.segment(ro, n);
    rows += n;
  }
  kn.Hr.selfadjointView<Eigen::Lower>().rankUpdate(jr.topRows(rows).transpose());
  kn.Hr.triangularView<Eigen::StrictlyUpper>() = kn.Hr.transpose();
}

// a noise-coupled knot's products of Rw (Knot::Lw, Lwz, Lww, Lwb) at the linearisation (d.r: the residual r + Rw w)
void coupledGram(Knot& kn, const IntervalData& d, bool consider) {
  using MK = MeasurementSpec::Kind;
  const IntervalModel& m = *kn.model;
  const int ndx = static_cast<int>(d.Rx.cols()), nth = static_cast<int>(kn.Rth.cols()), nv = m.nv;
  if (kn.Lwz.rows() != nv || kn.Lwz.cols() != ndx + nth) {  // first use of this knot as a coupled one
    kn.Lw.setZero(nv);
    kn.Lwz.setZero(nv, ndx + nth);
    kn.Lww.setZero(nv, nv);
    kn.Lwb.setZero(nv, kConsider);
  }
  kn.Lw.setZero();
  kn.Lwz.setZero();
  kn.Lww.setZero();
  kn.Lwb.setZero();
  for (size_t i = 0; i < m.measurements.size(); ++i) {  // Rw is zero outside the realised accelerometers' rows
    const MeasurementSpec& s = m.measurements[i];
    if (!s.realised) continue;
    const int ro = m.r_offsets[i], n = s.nr;
    const auto rw = d.Rw.middleRows(ro, n);
    kn.Lw.noalias() += rw.transpose() * d.r.segment(ro, n);
    kn.Lwz.leftCols(ndx).noalias() += rw.transpose() * d.Rx.middleRows(ro, n);
    kn.Lwz.rightCols(nth).noalias() += rw.transpose() * kn.Rth.middleRows(ro, n);
    kn.Lww.noalias() += rw.transpose() * rw;
    if (consider && s.bias_start < 0 && s.kind == MK::SpecificForce)
      kn.Lwb.middleCols(3, 3).noalias() += rw.transpose() * s.W;  // the accelerometer bias's columns
  }
}

// the inverse of a symmetric information matrix by Cholesky when it is well conditioned (reciprocal condition
// estimate above 1e-9), else its pseudo-inverse with relative cut-off rcond (the same matrix up to rounding when both
// apply: no eigenvalue is cut)
Mat covariance(const Mat& info, double rcond) {
  const Mat s = sym(info);
  Eigen::LLT<Mat> llt(s);
  if (llt.info() == Eigen::Success && llt.matrixLLT().allFinite() && llt.rcond() > 1e-9)
    return llt.solve(Mat::Identity(s.rows(), s.cols()));
  return pinvSym(s, rcond);
}

}  // namespace

Solver::Solver(const Parametrization& param, const Options& opts) : options(opts), param_(param) {}

// ------------------------------------------------------------------------------------------------ state manifold
void Solver::integrate(const Eigen::Ref<const Vec>& x, const Eigen::Ref<const Vec>& d, Eigen::Ref<Vec> out) const {
  PIN_CALL(pin::integrate(state_model_->model, x.head(nq_), d.head(nv_), out.head(nq_)));
  out.tail(nv_) = x.tail(nv_) + d.tail(nv_);
}

void Solver::difference(const Eigen::Ref<const Vec>& x0, const Eigen::Ref<const Vec>& x1, Eigen::Ref<Vec> out) const {
  PIN_CALL(pin::difference(state_model_->model, x0.head(nq_), x1.head(nq_), out.head(nv_)));
  out.tail(nv_) = x1.tail(nv_) - x0.tail(nv_);
}

// ------------------------------------------------------------------------------------------------ problem
void Solver::setNoise(Knot& kn, const NoiseRow& w0) const {
  kn.w0 = w0;
  kn.W.setZero();
  kn.W.diagonal() = w0;
  kn.has_dW = false;  // until the next refreshNoise (parametric noise)
}

Knot Solver::makeKnot(const std::shared_ptr<const IntervalModel>& m, const NoiseRow& w0, bool terminal) {
  Knot kn;
  kn.model = m;
  kn.data = m->createData();
  kn.trial = std::make_unique<IntervalData>(*m, kn.data->state);  // one Pinocchio state per knot
  ++timings.knots_allocated;
  kn.terminal = terminal;
  kn.W.setZero(nv_, nv_);
  kn.w0.setOnes(nv_);
  if (!terminal) setNoise(kn, w0);
  const int nth = param_.size();
  kn.Fth.setZero(ndx_, nth);
  kn.Rth.setZero(m->nr, nth);
  kn.Hr.setZero(ndx_ + nth, ndx_ + nth);
  kn.gr.setZero(ndx_ + nth);
  kn.Gr.setZero(ndx_ + nth, kConsider);
  kn.A.setZero(ndx_, ndx_);
  kn.C.setZero(ndx_, nth);
  kn.M1.setZero(nv_, nv_);
  kn.D.setZero(nv_, nv_);
  kn.gap.setZero(ndx_);
  kn.fbar.setZero(ndx_);
  kn.y.setZero(nx_);
  kn.gw.setZero(ndx_);
  kn.y_try.setZero(nx_);
  kn.c_try.setZero(ndx_);
  kn.next.setZero(ndx_);
  kn.ww.setZero(nv_);
  return kn;
}

void Solver::setProblem(const std::vector<std::shared_ptr<const IntervalModel>>& running,
                        const std::shared_ptr<const IntervalModel>& terminal, const Prior& p, const Mat& noise_info) {
  state_model_ = terminal;
  nq_ = terminal->nq;
  nv_ = terminal->nv;
  nx_ = terminal->nx;
  ndx_ = terminal->ndx;
  if (terminal->npi != param_.size()) throw std::invalid_argument("interval models and parametrization disagree");
  if (noise_info.rows() != static_cast<int>(running.size()) || noise_info.cols() != nv_)
    throw std::invalid_argument("noise information must be (N, nv): one row of velocity information per interval");
  knots_.clear();
  spare_.clear();
  for (size_t k = 0; k < running.size(); ++k)
    knots_.push_back(makeKnot(running[k], noise_info.row(static_cast<int>(k)).transpose(), false));
  knots_.push_back(makeKnot(terminal, Vec::Ones(nv_), true));
  noise_cov_.setZero(nv_, nv_);
  prior = p;
  prior.H = sym(prior.H);
  allocate();
  invalidate();
}

void Solver::invalidate() {
  linearized_ = false;
  marg_valid_ = false;
  for (Knot& kn : knots_) kn.linearized = kn.forward_ready = false;
}

void Solver::allocate() {
  const int n = N() + 1, nth = param_.size();
  Vx_.assign(n, Vec::Zero(ndx_));
  Vth_.assign(n, Vec::Zero(nth));
  Vxx_.assign(n, Mat::Zero(ndx_, ndx_));
  Vxth_.assign(n, Mat::Zero(ndx_, nth));
  Vthth_.assign(n, Mat::Zero(nth, nth));
  k_.assign(n, Vec::Zero(nv_));
  K_.assign(n, Mat::Zero(nv_, ndx_));
  P_.assign(n, Mat::Zero(nv_, nth));
  xi_.setZero(n, ndx_);
  dx.setZero(n, ndx_);
  dw.setZero(n - 1, nv_);
  xs_try_.assign(n, Vec::Zero(nx_));
  ws_try_.assign(n - 1, Vec::Zero(nv_));
  theta_try_.setZero(nth);
  dtheta.setZero(nth);
  pi.setZero(nth);
  dpi.setZero(nth, nth);
}

void Solver::setKnot(int k, const Vec& u, const Vec& z) {
  Knot& kn = knots_.at(k);
  if (u.size() && u.size() != kn.model->nu)
    throw std::invalid_argument("knot " + std::to_string(k) + ": u must have nu = " + std::to_string(kn.model->nu) +
                                " entries");
  if (u.size()) { kn.data->u = u; kn.trial->u = u; }
  if (z.size()) { kn.data->z = z; kn.trial->z = z; }
  kn.linearized = kn.forward_ready = false;
  linearized_ = false;
  marg_valid_ = false;
}

void Solver::setTorqueNoise(const Vec& torque_std, bool parametric) {
  torque_std_ = torque_std;
  parametric_noise_ = parametric && torque_std.size() > 0;
  for (Knot& kn : knots_) kn.has_dW = false;
  invalidate();
}

void Solver::setGuess(const std::vector<Vec>& xs_, const std::vector<Vec>& ws_, const Vec& theta_) {
  if (static_cast<int>(xs_.size()) != N() + 1) throw std::invalid_argument("need N+1 states");
  xs = xs_;
  ws = ws_.empty() ? std::vector<Vec>(N(), Vec::Zero(nv_)) : ws_;
  theta = theta_;
  invalidate();
}

// ------------------------------------------------------------------------------------------------ prior
double Solver::priorCost(const Vec& x0, const Vec& th) const {
  Vec e(ndx_ + th.size());
  difference(prior.x_bar, x0, e.head(ndx_));
  e.tail(th.size()) = th - prior.theta_bar;
  return prior.g.dot(e) + 0.5 * e.dot(prior.H * e);
}

Mat Solver::priorSensitivity(const Vec& x0) const {
  const int n = ndx_ + param_.size();
  if (prior.G.size() == 0) return Mat::Zero(n, kConsider);
  Mat jq = Mat::Zero(nv_, nv_);
  pin::dDifference(state_model_->model, prior.x_bar.head(nq_), x0.head(nq_), jq, pin::ARG1);
  Mat out = prior.G;
  out.topRows(nv_) = (jq.transpose() * prior.G.topRows(nv_)).eval();
  return out;
}

double Solver::priorLinearize(const Vec& x0, const Vec& th, Vec& grad, Mat& hess) const {
  const int nth = static_cast<int>(th.size());
  Vec e(ndx_ + nth);
  difference(prior.x_bar, x0, e.head(ndx_));
  e.tail(nth) = th - prior.theta_bar;
  Mat jq = Mat::Zero(nv_, nv_);  // Pinocchio writes only the joints' diagonal blocks
  pin::dDifference(state_model_->model, prior.x_bar.head(nq_), x0.head(nq_), jq, pin::ARG1);
  Mat jx = Mat::Identity(ndx_, ndx_);
  jx.topLeftCorner(nv_, nv_) = jq;
  grad = prior.g + prior.H * e;
  hess = prior.H;
  hess.topRows(ndx_) = (jx.transpose() * hess.topRows(ndx_)).eval();
  hess.leftCols(ndx_) = (hess.leftCols(ndx_) * jx).eval();
  grad.head(ndx_) = (jx.transpose() * grad.head(ndx_)).eval();
  return prior.g.dot(e) + 0.5 * e.dot(prior.H * e);
}

// ------------------------------------------------------------------------------------------------ linearisation
namespace {
// linearizeKnot's scratch, one set per thread: kept out of the knots, whose working set over an iteration exceeds
// the caches. Sized on first use; jr grows to the largest knot's rows (no allocation afterwards)
struct LinearizeScratch {
  Mat jr, jd0, jd1, emat, g;
};

LinearizeScratch& linearizeScratch(int nr, int ncols, int nv) {
  thread_local LinearizeScratch s;
  if (s.jr.rows() < nr || s.jr.cols() != ncols) s.jr.setZero(std::max<Eigen::Index>(nr, s.jr.rows()), ncols);
  for (Mat* m : {&s.jd0, &s.jd1, &s.emat, &s.g})
    if (m->rows() != nv) m->setZero(nv, nv);
  return s;
}
}  // namespace

void Solver::linearizeKnot(int k) {
  Knot& kn = knots_[k];
  IntervalData& d = *kn.data;
  LinearizeScratch& s = linearizeScratch(kn.model->nr, ndx_ + param_.size(), nv_);
  if (kn.forward_ready)
    MCOE_TIMED("linearise: IntervalModel::calcDiffAfterCalc", kn.model->calcDiffAfterCalc(d, xs[k], pi));
  else
    MCOE_TIMED("linearise: IntervalModel::calcDiff", kn.model->calcDiff(d, xs[k], pi));
  kn.forward_ready = false;
  kn.Rth.noalias() = d.Rp * dpi;
  const bool coupled = kn.coupled();
  if (coupled) d.r.noalias() += d.Rw * ws[k];  // the residual at the knot's noise
  MCOE_TIMED("measurementGram", measurementGram(kn, d, s.jr, options.consider));
  if (coupled) coupledGram(kn, d, options.consider);
  kn.cost = 0.5 * d.r.squaredNorm();
  kn.linearized = true;
  if (kn.terminal) return;
  PinTimer maps_timer("linearise: gap + transition maps", false);
  kn.Fth.noalias() = d.Fp * dpi;
  const Vec& w = ws[k];
  kn.ww.noalias() = kn.W * w;
  kn.cost += 0.5 * w.dot(kn.ww);
  kn.gw.tail(nv_) = w;  // G w: the noise has no q part (head stays 0)
  integrate(d.xnext, kn.gw, kn.y);
  difference(xs[k + 1], kn.y, kn.gap);
  PIN_CALL(pin::dDifference(state_model_->model, xs[k + 1].head(nq_), kn.y.head(nq_), s.jd0, pin::ARG0));
  PIN_CALL(pin::dDifference(state_model_->model, xs[k + 1].head(nq_), kn.y.head(nq_), s.jd1, pin::ARG1));
  // dDifference's Jacobians are block-diagonal by joint, and so are emat and g
  const PinModel& pm = state_model_->model;
  jointBlockInverse(pm, s.jd0, s.emat);
  s.emat = -s.emat;
  jointBlockProduct(pm, s.emat, s.jd1, s.g);  // times dIntegrate(f, G w)_q = 1 (the noise has no q part)
  kn.A.bottomRows(nv_) = d.Fx.bottomRows(nv_);
  jointBlockProduct(pm, s.g, d.Fx.topRows(nv_), kn.A.topRows(nv_));
  kn.C.bottomRows(nv_) = kn.Fth.bottomRows(nv_);
  jointBlockProduct(pm, s.g, kn.Fth.topRows(nv_), kn.C.topRows(nv_));
  jointBlockProduct(pm, s.g, d.jq, kn.M1);
  jointBlockProduct(pm, s.g, d.jv, kn.D);
  kn.fbar.tail(nv_) = kn.gap.tail(nv_);
  kn.fbar.head(nv_).noalias() = s.emat * kn.gap.head(nv_);
}

double Solver::calcDiff(bool reuse) {
  PinTimer total_timer("linearise (calcDiff)", false);
  param_.pi(theta, pi);
  param_.jacobian(theta, dpi);
  marg_valid_ = false;
  double cost = 0.0;
  MCOE_TIMED("linearise: prior cost", cost = priorCost(xs[0], theta));
  const int n = N() + 1;
  std::vector<KnotError> errors(n);
  // knots handed out one at a time: a thread that lost its core (a shared machine) does not hold back a fixed share;
  // every knot writes its own data only and the sums below run in knot order (results independent of the threads)
#pragma omp parallel for schedule(dynamic) num_threads(options.threads)
  for (int k = 0; k < n; ++k) {
    if (reuse && knots_[k].linearized) continue;  // kept by a shift: linearised at this very point
    try {
      linearizeKnot(k);
    } catch (const std::exception& e) {
      errors[k].record(e);
    }
  }
  for (int k = 0; k < n; ++k) {
    errors[k].rethrow(k);
    cost += knots_[k].cost;
  }
  linearized_ = true;
  return cost;
}

void Solver::refreshNoise(double& cost) {
  if (torque_std_.size() == 0) return;
  const int n = N();
  std::vector<KnotError> errors(n);
  // knots in parallel (each writes its own W and terms); the cost changes are summed in knot order below
#pragma omp parallel for schedule(dynamic) num_threads(options.threads)
  for (int k = 0; k < n; ++k) {
    try {
      thread_local Mat cov, Z, R;
      Knot& kn = knots_[k];
      const Vec& w = ws[k];
      const double before = w.dot(kn.W * w);
      // the torque noise on top of the interval's constant velocity noise diag(w0)^-1
      if (parametric_noise_)
        kn.model->noiseCovarianceFactors(*kn.data, xs[k].head(nq_), torque_std_, cov, Z, R);
      else
        kn.model->velocityNoiseCovariance(*kn.data, torque_std_, 0.0, cov);
      cov.diagonal() += kn.w0.cwiseInverse();
      if (parametric_noise_)
        setNoiseDerivative(kn, w, cov, Z, R);  // also W = S^T S
      else
        kn.W = cov.inverse();
      kn.refresh_delta = 0.5 * (w.dot(kn.W * w) - before);
    } catch (const std::exception& e) {
      errors[k].record(e);
    }
  }
  for (int k = 0; k < n; ++k) {
    errors[k].rethrow(k);
    cost += knots_[k].refresh_delta;
    knots_[k].cost += knots_[k].refresh_delta;
  }
}

void Solver::setNoiseDerivative(Knot& kn, const Vec& w, const Mat& cov, const Mat& Z, const Mat& R) const {
  // cost 1/2 ||S(theta) w||^2 with S = L^-1, cov = L L^T (W = S^T S): G[:, i] = (dS/dtheta_i) w = -Phi(S dcov_i S^T)
  // S w (Phi: lower triangle with half diagonal), l_theta = G^T S w, L_wtheta = S^T G, L_thth = G^T G. dcov_i =
  // -(X_i + X_i^T), X_i = Z C_i R (C_i: the mixing of dpi/dtheta_i, IntervalModel::noiseMixing), so S X_i S^T =
  // (S Z) C_i (R S^T): one small product per parameter (a payload block of rank 6, a rotor group's joints)
  const int nv = nv_, nth = param_.size(), nj = kn.model->nj;
  thread_local Mat sinv, sz, rs, x, phi, g, t6;
  thread_local Vec y, joints;
  thread_local Eigen::Matrix<double, 6, 6> b;
  if (kn.lth.size() != nth || kn.mix_b.cols() != nth) {  // first parametric refresh of this knot
    kn.lth.setZero(nth);
    kn.Lwth.setZero(nv, nth);
    kn.Lthth.setZero(nth, nth);
    kn.mix_b.setZero(36, nth);
    kn.mix_j.setZero(nj, nth);
    kn.zu.setZero(Z.cols());
    kn.ru.setZero(R.rows());
  }
  Eigen::LLT<Mat> llt(cov);
  if (llt.info() != Eigen::Success) throw FactorizationError("velocity-noise covariance not positive definite");
  sinv = Mat::Identity(nv, nv);
  llt.matrixL().solveInPlace(sinv);  // S = L^-1 (lower)
  kn.W.noalias() = sinv.transpose() * sinv;
  kn.nZ = Z;
  kn.nR = R;
  y.noalias() = sinv * w;
  sz.noalias() = sinv * Z;
  rs.noalias() = R * sinv.transpose();
  g.setZero(nv, nth);
  for (int i = 0; i < nth; ++i) {
    const bool any = kn.model->noiseMixing(dpi.col(i), b, joints);
    kn.mix_b.col(i) = Eigen::Map<const Vec>(b.data(), 36);
    kn.mix_j.col(i) = joints;
    if (!any) continue;
    x.setZero(nv, nv);  // S X_i S^T
    if (!b.isZero(0.0)) {
      t6.noalias() = b * rs.topRows(6);
      x.noalias() += sz.leftCols(6) * t6;
    }
    for (int j = 0; j < nj; ++j)  // a rotor group: rank one per joint of the group
      if (joints[j] != 0.0) x.noalias() += joints[j] * sz.col(6 + j) * rs.row(6 + j);
    phi = -(x + x.transpose());
    phi.diagonal() *= 0.5;
    g.col(i).noalias() = -(phi.triangularView<Eigen::Lower>() * y);
  }
  kn.lth.noalias() = g.transpose() * y;
  kn.Lwth.noalias() = sinv.transpose() * g;
  kn.Lthth.noalias() = g.transpose() * g;
  kn.has_dW = true;
}

// ------------------------------------------------------------------------------------------------ Riccati
void Solver::backwardPass(double reg) {
  const int n = N(), nth = param_.size(), nv = nv_;
  {
    const Knot& t = knots_[n];
    Vx_[n] = t.gr.head(ndx_);
    Vth_[n] = t.gr.tail(nth);
    Vxx_[n] = t.Hr.topLeftCorner(ndx_, ndx_);
    Vxth_[n] = t.Hr.topRightCorner(ndx_, nth);
    Vthth_[n] = t.Hr.bottomRightCorner(nth, nth);
  }
  if (nv == 18)  // the Go1 (and any 12-joint floating-base robot): fixed-size blocks
    riccatiSweep<18>(state_model_->model, knots_, ws, nv, nth, reg, Vx_, Vth_, Vxx_, Vxth_, Vthth_, k_, K_, P_);
  else
    riccatiSweep<Eigen::Dynamic>(state_model_->model, knots_, ws, nv, nth, reg, Vx_, Vth_, Vxx_, Vxth_, Vthth_, k_, K_,
                                 P_);
}

void Solver::arrival(double reg, std::string& method) {
  const int nth = param_.size(), n = ndx_ + nth;
  priorLinearize(xs[0], theta, prior_grad_, prior_hess_);
  arrival_grad_ = prior_grad_;
  arrival_hess_ = prior_hess_;
  arrival_grad_.head(ndx_) += Vx_[0];
  arrival_grad_.tail(nth) += Vth_[0];
  arrival_hess_.topLeftCorner(ndx_, ndx_) += Vxx_[0];
  arrival_hess_.topRightCorner(ndx_, nth) += Vxth_[0];
  arrival_hess_.bottomLeftCorner(nth, ndx_) += Vxth_[0].transpose();
  arrival_hess_.bottomRightCorner(nth, nth) += Vthth_[0];
  arrival_hess_ = sym(arrival_hess_);
  const Mat vxx = arrival_hess_.topLeftCorner(ndx_, ndx_);
  const Mat vxth = arrival_hess_.topRightCorner(ndx_, nth);
  const Mat vthth = arrival_hess_.bottomRightCorner(nth, nth);
  const Vec vx = arrival_grad_.head(ndx_), vth = arrival_grad_.tail(nth);
  bool null = options.arrival == "nullspace";
  Mat y;
  Vec lam;
  int null_dim = 0;
  if (options.arrival == "auto" || null) {
    null_dim = rangeBasis(vthth, options.rank_tol, y, lam);
    if (options.arrival == "auto") null = null_dim > 0;
  }
  Eigen::LLT<Mat> llt;
  Vec vx0;
  Mat vxx0;
  if (null) {
    const Vec inv_lam = (lam.array() + reg).inverse().matrix();
    const Vec k_y = inv_lam.asDiagonal() * (y.transpose() * vth);
    const Mat kk_y = inv_lam.asDiagonal() * (y.transpose() * vxth.transpose());
    vx0 = vx - vxth * (y * k_y);
    vxx0 = vxx - vxth * (y * kk_y);
    cholesky(llt, Mat(sym(vxx0) + reg * Mat::Identity(ndx_, ndx_)), "arrival Schur complement (nullspace)");
    dx0_ = -llt.solve(vx0);
    dtheta = -(y * (k_y + kk_y * dx0_));
    method = "nullspace";
  } else {
    Eigen::LLT<Mat> llt_t;
    Mat rhs(nth, 1 + ndx_);
    rhs.col(0) = vth;
    rhs.rightCols(ndx_) = vxth.transpose();
    cholesky(llt_t, Mat(vthth + reg * Mat::Identity(nth, nth)), "V_thth not positive definite");
    const Mat s = llt_t.solve(rhs);
    const Vec k_t = s.col(0);
    const Mat kk_t = s.rightCols(ndx_);
    vx0 = vx - vxth * k_t;
    vxx0 = vxx - vxth * kk_t;
    cholesky(llt, Mat(sym(vxx0) + reg * Mat::Identity(ndx_, ndx_)), "arrival Schur complement");
    dx0_ = -llt.solve(vx0);
    dtheta = -(k_t + kk_t * dx0_);
    method = "schur";
  }
  if (!dx0_.allFinite() || !dtheta.allFinite()) throw FactorizationError("non-finite arrival step");
  (void)n;
}

void Solver::computeDirection(double reg, double& d1, double& d2, std::string& method) {
  PinTimer total_timer("direction (computeDirection)", false);
  MCOE_TIMED("direction: backwardPass", backwardPass(reg));
  MCOE_TIMED("direction: arrival", arrival(reg, method));
  PinTimer sweep_timer("direction: forward sweep", false);
  const int nth = param_.size();
  Vec e(ndx_ + nth);
  e.head(ndx_) = dx0_;
  e.tail(nth) = dtheta;
  d1 = prior_grad_.dot(e);
  d2 = e.dot(prior_hess_ * e);
  dx.row(0) = dx0_.transpose();
  // preallocated (no allocation per knot): v up to the largest knot's residual rows
  int nr_max = 0;
  for (const Knot& kn : knots_) nr_max = std::max(nr_max, kn.model->nr);
  Vec v_all(nr_max), dxk(ndx_), dwk(nv_), wdw(nv_), xik(ndx_);
  for (int k = 0; k <= N(); ++k) {
    const Knot& kn = knots_[k];
    const IntervalData& d = *kn.data;
    dxk = dx.row(k).transpose();
    auto v = v_all.head(d.Rx.rows());
    v.noalias() = d.Rx * dxk;
    v.noalias() += kn.Rth * dtheta;
    if (!kn.terminal) {
      dwk = -k_[k];
      dwk.noalias() -= K_[k] * dxk;
      dwk.noalias() -= P_[k] * dtheta;
      dw.row(k) = dwk.transpose();
      if (kn.coupled()) v.noalias() += d.Rw * dwk;
    }
    d1 += d.r.dot(v);
    d2 += v.squaredNorm();
    if (kn.terminal) break;
    wdw.noalias() = kn.W * dwk;
    d1 += ws[k].dot(wdw);
    d2 += dwk.dot(wdw);
    if (kn.has_dW) {  // parametric noise: the noise cost's theta terms
      d1 += kn.lth.dot(dtheta);
      d2 += 2.0 * dwk.dot(kn.Lwth * dtheta) + dtheta.dot(kn.Lthth * dtheta);
    }
    Knot& kw = knots_[k];
    kw.next = kn.fbar;
    kw.next.noalias() += kn.A * dxk;
    kw.next.noalias() += kn.C * dtheta;
    kw.next.tail(nv_) += dwk;
    dx.row(k + 1) = kw.next.transpose();
    xik = Vx_[k + 1];
    xik.noalias() += Vxx_[k + 1] * kw.next;
    xik.noalias() += Vxth_[k + 1] * dtheta;
    xi_.row(k + 1) = xik.transpose();
  }
}

double Solver::tryStep(double alpha, double& gap_l1) {
  PinTimer total_timer("trial (tryStep)", false);
  const int n = N() + 1;
  theta_try_ = theta + alpha * dtheta;
  param_.pi(theta_try_, pi_try_);
  double cost = 0.0;
  MCOE_TIMED("trial: states + prior cost",
             for (int k = 0; k < n; ++k) {
               step_ = alpha * dx.row(k).transpose();
               integrate(xs[k], step_, xs_try_[k]);
             } cost = priorCost(xs_try_[0], theta_try_));
  std::vector<std::string> errors(n);
#pragma omp parallel for schedule(dynamic) num_threads(options.threads)
  for (int k = 0; k < n; ++k) {
    try {
      Knot& kn = knots_[k];
      IntervalData& t = *kn.trial;
      MCOE_TIMED("trial: IntervalModel::calc", kn.model->calc(t, xs_try_[k], pi_try_));
      kn.trial_cost = 0.5 * t.r.squaredNorm();
      kn.trial_gap = 0.0;
      if (!kn.terminal) {
        ws_try_[k] = ws[k] + alpha * dw.row(k).transpose();
        if (kn.coupled()) {  // the residual r + Rw w (Rw of the linearisation: constant for a base-frame IMU)
          t.r.noalias() += kn.data->Rw * ws_try_[k];
          kn.trial_cost = 0.5 * t.r.squaredNorm();
        }
        kn.ww.noalias() = kn.W * ws_try_[k];
        kn.trial_cost += 0.5 * ws_try_[k].dot(kn.ww);
        if (kn.has_dW) {
          // parametric noise: 1/2 w^T (W + sum_i dtheta_i dW_i) w, dtheta = alpha * direction, with
          // w^T dW_i w = 2 u^T X_i u = 2 (Z^T u)^T C_i (R u), u = W w
          kn.zu.noalias() = kn.nZ.transpose() * kn.ww;
          kn.ru.noalias() = kn.nR * kn.ww;
          const int nj = kn.model->nj;
          double dq = 0.0;
          for (int i = 0; i < dtheta.size(); ++i) {
            if (dtheta[i] == 0.0) continue;
            const Eigen::Map<const Eigen::Matrix<double, 6, 6>> bi(kn.mix_b.col(i).data());
            double q = kn.zu.head<6>().dot(bi * kn.ru.head<6>());
            q += (kn.zu.tail(nj).array() * kn.mix_j.col(i).array() * kn.ru.tail(nj).array()).sum();
            dq += dtheta[i] * 2.0 * q;
          }
          kn.trial_cost += 0.5 * alpha * dq;
        }
        kn.gw.tail(nv_) = ws_try_[k];
        integrate(t.xnext, kn.gw, kn.y_try);
        difference(xs_try_[k + 1], kn.y_try, kn.c_try);
        kn.trial_gap = kn.c_try.cwiseAbs().sum();
      }
    } catch (const std::exception& e) {
      errors[k] = e.what();
    }
  }
  gap_l1 = 0.0;
  for (int k = 0; k < n; ++k) {
    if (!errors[k].empty()) return std::numeric_limits<double>::infinity();
    cost += knots_[k].trial_cost;
    gap_l1 += knots_[k].trial_gap;
  }
  return cost;
}

Result Solver::solve(int max_iter) {
  const Options& o = options;
  if (static_cast<int>(xs.size()) != N() + 1) throw std::invalid_argument("no initial guess: set xs");
  const auto t0 = std::chrono::steady_clock::now();
  double reg = o.reg_init, nu = o.nu_init;
  std::deque<std::pair<double, double>> hist;
  const size_t memory = std::max(1, o.nonmonotone_memory);
  Result res;
  res.status = "max_iter";
  bool recalc = true;
  double cost = std::numeric_limits<double>::infinity(), gap_l1 = cost, gap_inf = cost;
  int it = 0;
  for (it = 0; it <= max_iter; ++it) {
    if (recalc) {
      const auto tl = std::chrono::steady_clock::now();
      cost = calcDiff(it == 0);
      (it == 0 ? timings.linearize : timings.relinearize) += elapsed(tl);
      // a parametric noise model (its theta terms depend on the point) is refreshed at every linearisation
      if (o.refresh_noise && (it == 0 || parametric_noise_)) refreshNoise(cost);
      gap_l1 = 0.0;
      gap_inf = 0.0;
      for (int k = 0; k < N(); ++k) {
        gap_l1 += knots_[k].gap.cwiseAbs().sum();
        gap_inf = std::max(gap_inf, knots_[k].gap.cwiseAbs().maxCoeff());
      }
      if (hist.empty()) hist.emplace_back(cost, gap_l1);
    }
    if (stop_requested_.load()) {  // the estimate is linearised (covariances), no further step
      res.status = "stopped";
      break;
    }
    if (it == max_iter && !o.final_direction) {  // no direction at the returned point
      arrival_hess_.resize(0, 0);
      break;
    }
    double d1 = 0.0, d2 = 0.0;
    std::string method;
    const auto td = std::chrono::steady_clock::now();
    try {
      computeDirection(reg, d1, d2, method);
      timings.direction += elapsed(td);
    } catch (const FactorizationError&) {
      timings.direction += elapsed(td);
      reg = std::max(reg * o.reg_factor, o.reg_base);
      res.log.push_back({it, cost, cost + nu * gap_l1, gap_l1, 0.0, reg, std::nan(""), elapsed(t0), "failed"});
      recalc = false;
      if (reg > o.reg_max) {
        res.status = "regularisation above reg_max";
        break;
      }
      continue;
    }
    const double stop = -(d1 + 0.5 * d2);
    if (gap_inf <= o.tol_gap && stop <= o.tol_stop) {
      res.converged = true;
      res.status = "converged";
      break;
    }
    if (it == max_iter) break;
    if (o.max_time >= 0.0 && elapsed(t0) > o.max_time) {
      res.status = "max_time";
      break;
    }
    if (stop_requested_.load()) {
      res.status = "stopped";
      break;
    }
    const double xi_max = N() ? xi_.bottomRows(N()).cwiseAbs().maxCoeff() : 0.0;
    nu = std::max(nu, 1.1 * xi_max);
    const double merit = cost + nu * gap_l1;
    double ref = -std::numeric_limits<double>::infinity();
    for (const auto& h : hist) ref = std::max(ref, h.first + nu * h.second);
    double alpha = 1.0, c_try = 0.0, g_try = 0.0;
    bool accepted = false;
    const auto ts = std::chrono::steady_clock::now();
    while (alpha >= o.alpha_min) {
      c_try = tryStep(alpha, g_try);
      const double m_try = c_try + nu * g_try;
      const double dm = alpha * (d1 - nu * gap_l1) + 0.5 * alpha * alpha * d2;
      if (std::isfinite(m_try) && m_try - ref <= o.armijo * std::min(dm, 0.0)) {
        accepted = true;
        break;
      }
      alpha *= 0.5;
    }
    timings.line_search += elapsed(ts);
    res.log.push_back({it, cost, merit, gap_l1, accepted ? alpha : 0.0, reg, stop, elapsed(t0), method});
    if (accepted) {
      std::swap(xs, xs_try_);
      std::swap(ws, ws_try_);
      theta = theta_try_;
      for (Knot& kn : knots_) {  // the trial data hold calc() at the new point: the next linearisation starts there
        std::swap(kn.data, kn.trial);
        kn.linearized = false;
        kn.forward_ready = true;
      }
      marg_valid_ = false;
      hist.emplace_back(c_try, g_try);
      if (hist.size() > memory) hist.pop_front();
      recalc = true;
      linearized_ = false;
      if (alpha >= 0.5) {
        reg = reg / o.reg_factor;
        if (reg < o.reg_base) reg = o.reg_min;
      } else if (alpha <= 0.01) {
        reg = std::max(reg * o.reg_factor, o.reg_base);
      }
    } else {
      recalc = false;
      reg = std::max(reg * o.reg_factor, o.reg_base);
      if (reg > o.reg_max) {
        res.status = "regularisation above reg_max";
        break;
      }
    }
  }
  res.iterations = it;
  res.cost = cost;
  res.gap = gap_inf;
  res.arrival_hessian = arrival_hess_;
  param_.pi(theta, pi);
  return res;
}

// ------------------------------------------------------------------------------------------------ receding horizon
void Solver::marginalizeKnot(const Knot& kn, const Vec& w, Mat& h, Vec& g, Mat& G) {
  // noise on the velocities S = [nv, 2 nv); the position rows Q = [0, nv) of the transition are constraints. In
  // y = (dx_S, dtheta, dx'_Q, dx'_S) the old variables are dx_Q = Tq y + t0 (Tq zero on dx'_S), dx_S and dtheta are
  // entries of y; the products below use that structure (the Python reference forms the dense maps).
  const int nv = nv_, nth = param_.size(), ns = nv, nr = ns + nth, m = nr + ndx_, mc = nr + nv;
  const Mat& A = kn.A;
  const Mat& C = kn.C;
  const Vec& fbar = kn.fbar;
  mk_ainv_ = A.topLeftCorner(nv, nv).inverse();
  mk_tq_.resize(nv, mc);
  mk_tq_.leftCols(ns).noalias() = -mk_ainv_ * A.topRightCorner(nv, nv);
  mk_tq_.middleCols(ns, nth).noalias() = -mk_ainv_ * C.topRows(nv);
  mk_tq_.rightCols(nv) = mk_ainv_;
  mk_t0_.noalias() = -mk_ainv_ * fbar.head(nv);
  // prior part: Z^T h Z on the first mc entries of y (h ordered (x_Q, x_S, theta): x_S, theta are contiguous). hy is
  // symmetric: its lower triangle is formed, then mirrored
  mk_p_.resize(ndx_ + nth, mc);
  mk_p_.noalias() = h.leftCols(nv) * mk_tq_;
  mk_p_.leftCols(nr) += h.rightCols(nr);
  mk_hy_.setZero(m, m);
  mk_hy_.topLeftCorner(mc, mc).triangularView<Eigen::Lower>() += mk_tq_.transpose() * mk_p_.topRows(nv);
  mk_hy_.topLeftCorner(nr, mc) += mk_p_.bottomRows(nr);
  mk_hz0_ = g;
  mk_hz0_.noalias() += h.leftCols(nv) * mk_t0_;
  mk_gy_.setZero(m);
  mk_gy_.head(mc).noalias() = mk_tq_.transpose() * mk_hz0_.head(nv);
  mk_gy_.head(nr) += mk_hz0_.tail(nr);
  // the consider sensitivity (G empty: off): the same map without the constant terms (t0, m0)
  const int kc = G.size() ? kConsider : 0;
  mk_gby_.setZero(m, kc);
  if (kc) {
    mk_gby_.topRows(mc).noalias() = mk_tq_.transpose() * G.topRows(nv);
    mk_gby_.topRows(nr) += G.bottomRows(nr);
  }
  // noise part: w + dw = (w + m0) + Mw y with Mw the velocity rows of the transition solved for dw
  const auto avq = A.bottomLeftCorner(nv, nv);
  mk_mw_.resize(ns, m);
  mk_mw_.leftCols(mc).noalias() = -avq * mk_tq_;
  mk_mw_.leftCols(ns) -= A.bottomRightCorner(nv, nv);
  mk_mw_.middleCols(ns, nth) -= C.bottomRows(nv);
  mk_mw_.rightCols(nv).setIdentity();
  mk_m0_ = w - fbar.tail(nv);
  mk_m0_.noalias() -= avq * mk_t0_;
  mk_dw0_ = mk_m0_ - w;  // dw = dw0 + Mw y
  if (kn.W.isDiagonal(0.0)) {  // constant velocity noise (no torque-noise model): W = S^2, Mw^T W Mw = (S Mw)^T (S Mw)
    mk_sw_ = kn.W.diagonal().cwiseSqrt();
    mk_lw_.noalias() = mk_sw_.asDiagonal() * mk_mw_;
    mk_hy_.selfadjointView<Eigen::Lower>().rankUpdate(mk_lw_.transpose());
    mk_m0_.array() *= mk_sw_.array();
  } else {
    mk_lw_.noalias() = kn.W * mk_mw_;
    mk_hy_.triangularView<Eigen::Lower>() += mk_mw_.transpose() * mk_lw_;
  }
  mk_gy_.noalias() += mk_lw_.transpose() * mk_m0_;
  mk_hy_.triangularView<Eigen::StrictlyUpper>() = mk_hy_.transpose();
  if (kn.coupled()) {
    // the measurement r + J (z0 + Z y) + Rw (dw0 + Mw y), J = [Rx Rth] over (dx, dtheta) = z0 + Z y: its J^T J and
    // J^T r parts came with h, g (Hr, gr added by the caller and mapped by Z above); the Rw terms: with jw = Lwz Z,
    // hy += jw^T Mw + Mw^T jw + Mw^T Lww Mw, gy += jw^T dw0 + Mw^T (Lw + Lwz z0 + Lww dw0), dg/db += Mw^T Lwb
    mk_jw_.setZero(nv, m);
    mk_jw_.leftCols(mc).noalias() = kn.Lwz.leftCols(nv) * mk_tq_;
    mk_jw_.leftCols(ns) += kn.Lwz.middleCols(nv, nv);
    mk_jw_.middleCols(ns, nth) += kn.Lwz.rightCols(nth);
    mk_z_.noalias() = mk_jw_.transpose() * mk_mw_;  // (m, m)
    mk_hy_ += mk_z_;
    mk_hy_ += mk_z_.transpose();
    mk_lm_.noalias() = kn.Lww * mk_mw_;
    mk_hy_.noalias() += mk_mw_.transpose() * mk_lm_;
    mk_gy_.noalias() += mk_jw_.transpose() * mk_dw0_;
    mk_sw_ = kn.Lw;
    mk_sw_.noalias() += kn.Lwz.leftCols(nv) * mk_t0_;
    mk_sw_.noalias() += kn.Lww * mk_dw0_;
    mk_gy_.noalias() += mk_mw_.transpose() * mk_sw_;
    if (kc) mk_gby_.noalias() += mk_mw_.transpose() * kn.Lwb;
  }
  if (kn.has_dW) {  // parametric noise: l_th^T dth + dw^T L_wth dth + 1/2 dth^T L_thth dth, dth = y[ns, ns + nth)
    mk_mt_.noalias() = mk_mw_.transpose() * kn.Lwth;  // (m, nth)
    mk_hy_.middleCols(ns, nth) += mk_mt_;
    mk_hy_.middleRows(ns, nth) += mk_mt_.transpose();
    mk_hy_.block(ns, ns, nth, nth) += kn.Lthth;
    mk_gy_.segment(ns, nth) += kn.lth;
    mk_gy_.segment(ns, nth).noalias() += kn.Lwth.transpose() * mk_dw0_;
  }
  // eliminate dx_S (Schur complement; H_uu = L L^T: H_rr - H_ru H_uu^-1 H_ur = H_rr - X^T X with X = L^-1 H_ur)
  const auto huu = mk_hy_.topLeftCorner(ns, ns);
  const auto hur = mk_hy_.topRightCorner(ns, m - ns);
  mk_rhs_.resize(ns, 1 + m - ns + kc);
  mk_rhs_.col(0) = mk_gy_.head(ns);
  mk_rhs_.middleCols(1, m - ns) = hur;
  mk_rhs_.rightCols(kc) = mk_gby_.topRows(ns);
  mk_hr_ = mk_hy_.bottomRightCorner(m - ns, m - ns);
  mk_llt_.compute(huu);
  if (mk_llt_.info() == Eigen::Success) {
    mk_llt_.matrixL().solveInPlace(mk_rhs_);
    mk_hr_.selfadjointView<Eigen::Lower>().rankUpdate(mk_rhs_.middleCols(1, m - ns).transpose(), -1.0);
    mk_hr_.triangularView<Eigen::StrictlyUpper>() = mk_hr_.transpose();
  } else {  // not positive definite (rounding): LU, as the Python reference
    mk_s_ = huu.partialPivLu().solve(mk_rhs_);
    mk_hr_.noalias() -= hur.transpose() * mk_s_.middleCols(1, m - ns);
    mk_rhs_.col(0) = mk_s_.col(0);
    mk_rhs_.rightCols(kc) = mk_s_.rightCols(kc);
    mk_rhs_.middleCols(1, m - ns) = hur;
  }
  mk_gy_.tail(m - ns).noalias() -= mk_rhs_.middleCols(1, m - ns).transpose() * mk_rhs_.col(0);
  if (kc) mk_gby_.bottomRows(m - ns).noalias() -= mk_rhs_.middleCols(1, m - ns).transpose() * mk_rhs_.rightCols(kc);
  // reorder (dtheta, dx') -> (dx', dtheta)
  h.resize(ndx_ + nth, ndx_ + nth);
  g.resize(ndx_ + nth);
  h.topLeftCorner(ndx_, ndx_) = mk_hr_.bottomRightCorner(ndx_, ndx_);
  h.topRightCorner(ndx_, nth) = mk_hr_.bottomLeftCorner(ndx_, nth);
  h.bottomLeftCorner(nth, ndx_) = mk_hr_.topRightCorner(nth, ndx_);
  h.bottomRightCorner(nth, nth) = mk_hr_.topLeftCorner(nth, nth);
  g.head(ndx_) = mk_gy_.tail(ndx_);
  g.tail(nth) = mk_gy_.segment(ns, nth);
  if (kc) {
    G.resize(ndx_ + nth, kConsider);
    G.topRows(ndx_) = mk_gby_.bottomRows(ndx_);
    G.bottomRows(nth) = mk_gby_.middleRows(ns, nth);
  }
}

Prior Solver::marginalPrior(int k, bool relinearize) {
  if (!relinearize && marg_valid_ && k >= 1 && k <= static_cast<int>(marg_h_.size()))
    return Prior{xs[k], theta, sym(marg_h_[k - 1]), marg_g_[k - 1], marg_G_[k - 1]};  // stored by terminalCovariance
  return marginalRecursion(k, relinearize, false);
}

Prior Solver::marginalRecursion(int k, bool relinearize, bool store) {
  if (relinearize) {
    param_.pi(theta, pi);
    param_.jacobian(theta, dpi);
    marg_valid_ = false;
  }
  Vec g;
  Mat h;
  priorLinearize(xs[0], theta, g, h);
  Mat G = options.consider ? priorSensitivity(xs[0]) : Mat();
  if (store) {
    marg_h_.resize(k);
    marg_g_.resize(k);
    marg_G_.resize(k);
  }
  for (int j = 0; j < k; ++j) {
    if (relinearize) linearizeKnot(j);
    const Knot& kn = knots_[j];
    h += kn.Hr;
    g += kn.gr;
    if (options.consider) G += kn.Gr;
    marginalizeKnot(kn, ws[j], h, g, G);
    if (store) {
      marg_h_[j] = h;
      marg_g_[j] = g;
      marg_G_[j] = G;
    }
  }
  if (store) marg_valid_ = true;
  return Prior{xs[k], theta, sym(h), g, G};
}

Mat Solver::terminalCovariance() {
  const auto t0 = std::chrono::steady_clock::now();
  const int n = N();
  // at the current linearisation; the marginals of every prefix are kept for the next shift
  const Prior p = marginalRecursion(n, false, true);
  // the prior's linearisation at its own mean is its Hessian (d(x ⊖ x)/dx = 1)
  Mat hess = p.H;
  hess += knots_[n].Hr;
  Mat cov = covariance(hess, 1e-12);
  if (options.consider)
    considerSensitivity.noalias() = -cov * (p.G + knots_[n].Gr);
  else
    considerSensitivity.setZero(cov.rows(), kConsider);
  timings.covariance += elapsed(t0);
  return cov;
}

double Solver::pinocchioFloor() {
  const int threads = options.threads;
  options.threads = 1;
  for (Knot& kn : knots_) kn.forward_ready = false;  // time the full linearisation
  pinTiming() = true;
  pinTime() = 0.0;
  pinSiteTimes().clear();
  try {
    calcDiff();
    double gap = 0.0;
    tryStep(1.0, gap);
  } catch (...) {
    pinTiming() = false;
    options.threads = threads;
    throw;
  }
  pinTiming() = false;
  options.threads = threads;
  return pinTime();
}

void Solver::rolloutGuess(int start) {
  param_.pi(theta, pi_try_);
  Vec gw = Vec::Zero(ndx_);
  for (int k = start; k < N(); ++k) {
    Knot& kn = knots_[k];
    kn.model->calc(*kn.trial, xs[k], pi_try_);
    gw.tail(nv_) = ws[k];
    integrate(kn.trial->xnext, gw, xs[k + 1]);
    // the trial holds calc() at (xs[k], pi(theta)), where the next solve linearises this knot: its data
    std::swap(kn.data, kn.trial);
    kn.forward_ready = true;
  }
}

void Solver::shift(int k, const std::vector<std::shared_ptr<const IntervalModel>>& running,
                   const std::shared_ptr<const IntervalModel>& terminal, const std::vector<Vec>& us,
                   const std::vector<Vec>& zs, const Vec& u_terminal, const Vec& z_terminal, const Mat& noise_info) {
  const int n_old = N();
  if (static_cast<int>(running.size()) != k || k <= 0 || k > n_old)
    throw std::invalid_argument("shift needs 0 < k <= N and k new models");
  if (noise_info.rows() != k || noise_info.cols() != nv_)
    throw std::invalid_argument("shift: noise information must be (k, nv), one row per new interval");
  const auto t0 = std::chrono::steady_clock::now();
  // marginal prior from the solve's linearisation when it is the current one (no dynamics evaluation)
  Prior p = marginalPrior(k, !linearized_);
  // recycle the dropped knots (k running + the old terminal) and the spare ones of earlier shifts whose model
  // matches (their data are used as they are: a used data of the same model gives a fresh one's results bit for bit)
  // or differs only in its measurements (reset: same contact set); the others are allocated. (A data reset to another
  // contact phase's model is not bit-identical to a fresh one: Pinocchio's Data keeps state across contact sets,
  // test/test_compiled_memory.py.) Pool order: the spares (oldest first), then the knots dropped now.
  std::vector<Knot> pool;
  pool.reserve(spare_.size() + k + 1);
  for (Knot& s : spare_) pool.push_back(std::move(s));
  spare_.clear();
  for (int j = 0; j < k; ++j) pool.push_back(std::move(knots_[j]));
  pool.push_back(std::move(knots_[n_old]));
  std::vector<Knot> next;
  next.reserve(n_old + 1);
  for (int j = k; j < n_old; ++j) next.push_back(std::move(knots_[j]));
  // A new knot takes a pooled knot of its own model, else one whose model differs only in the measurements (the
  // stance feet's zero-velocity pseudo-measurements: same contact set, its data are reset to the new model), else it
  // is allocated
  std::vector<bool> used(pool.size(), false);
  std::vector<int> take(k + 1, -1);
  const auto model_of = [&](int j) -> const std::shared_ptr<const IntervalModel>& {
    return j == k ? terminal : running[j];
  };
  for (int j = 0; j <= k; ++j)
    for (size_t i = 0; i < pool.size() && take[j] < 0; ++i)
      if (!used[i] && pool[i].model == model_of(j)) take[j] = static_cast<int>(i), used[i] = true;
  for (int j = 0; j <= k; ++j)
    for (size_t i = 0; i < pool.size() && take[j] < 0; ++i)
      if (!used[i] && pool[i].model->sameDynamics(*model_of(j))) take[j] = static_cast<int>(i), used[i] = true;
  const int nth = param_.size();
  for (int j = 0; j <= k; ++j) {
    const bool terminal_ = j == k;
    const auto& m = model_of(j);
    if (take[j] < 0) {
      next.push_back(terminal_ ? makeKnot(m, Vec::Ones(nv_), true) : makeKnot(m, noise_info.row(j).transpose(), false));
      continue;
    }
    Knot kn = std::move(pool[take[j]]);
    if (kn.model != m) {
      kn.data->reset(*m);
      kn.trial->reset(*m);
      kn.model = m;
      kn.Rth.setZero(m->nr, nth);
    }
    kn.terminal = terminal_;
    kn.linearized = kn.forward_ready = false;
    if (terminal_) {
      kn.w0.setOnes();
      kn.W.setIdentity();
    } else {
      setNoise(kn, noise_info.row(j).transpose());
    }
    next.push_back(std::move(kn));
  }
  knots_ = std::move(next);
  // the untaken ones become the spares, the oldest beyond the cap are freed
  for (size_t i = 0; i < pool.size(); ++i)
    if (!used[i]) spare_.push_back(std::move(pool[i]));
  const size_t cap = options.spare_knots < 0 ? knots_.size() : static_cast<size_t>(options.spare_knots);
  if (spare_.size() > cap) spare_.erase(spare_.begin(), spare_.begin() + (spare_.size() - cap));
  prior = p;
  for (int j = 0; j < k; ++j) setKnot(n_old - k + j, us[j], zs[j]);
  setKnot(N(), u_terminal, z_terminal);
  // states and noises move k knots to the front (no allocation); the new knots start from the last state, zero noise
  std::rotate(xs.begin(), xs.begin() + k, xs.end());
  for (int j = n_old - k + 1; j <= n_old; ++j) xs[j] = xs[n_old - k];
  std::rotate(ws.begin(), ws.begin() + k, ws.end());
  for (int j = n_old - k; j < n_old; ++j) ws[j].setZero();
  rolloutGuess(n_old - k);
  if (static_cast<int>(Vx_.size()) != N() + 1) allocate();
  // the kept knots keep their linearisation (same states, noises, theta and inputs): the next solve's first
  // linearisation only evaluates the new ones
  linearized_ = false;
  marg_valid_ = false;
  timings.shift += elapsed(t0);
}

}  // namespace mcoe
