#include "interval.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <stdexcept>

#include <pinocchio/algorithm/aba-derivatives.hpp>
#include <pinocchio/algorithm/aba.hpp>
#include <pinocchio/algorithm/constrained-dynamics.hpp>
#include <pinocchio/algorithm/frames-derivatives.hpp>
#include <pinocchio/algorithm/frames.hpp>
#include <pinocchio/algorithm/impulse-dynamics-derivatives.hpp>
#include <pinocchio/algorithm/impulse-dynamics.hpp>
#include <pinocchio/algorithm/jacobian.hpp>
#include <pinocchio/algorithm/joint-configuration.hpp>
#include <pinocchio/algorithm/kinematics-derivatives.hpp>
#include <pinocchio/algorithm/kinematics.hpp>
#include <pinocchio/algorithm/regressor.hpp>
#include <pinocchio/algorithm/rnea-derivatives.hpp>
#include <pinocchio/spatial.hpp>

namespace mcoe {

namespace pin = pinocchio;
using MK = MeasurementSpec::Kind;

namespace {
// d(spatial inertia (6x6, linear then angular, about the frame origin))/d(pi_k) for Pinocchio's dynamic parameters
// pi = (m, m c_x, m c_y, m c_z, I_xx, I_xy, I_yy, I_xz, I_yz, I_zz) (I about the frame origin): the matrix
// [[m 1, -[h]x], [[h]x, I]] is linear in pi
const std::array<Eigen::Matrix<double, 6, 6>, 10>& spatialInertiaBasis() {
  static const std::array<Eigen::Matrix<double, 6, 6>, 10> basis = [] {
    std::array<Eigen::Matrix<double, 6, 6>, 10> b;
    for (auto& m : b) m.setZero();
    b[0].topLeftCorner<3, 3>().setIdentity();
    for (int a = 0; a < 3; ++a) {
      const Mat3 h = pin::skew(Vec3(Vec3::Unit(a)));
      b[1 + a].topRightCorner<3, 3>() = -h;
      b[1 + a].bottomLeftCorner<3, 3>() = h;
    }
    const int rows[6] = {0, 0, 1, 0, 1, 2}, cols[6] = {0, 1, 1, 2, 2, 2};
    for (int i = 0; i < 6; ++i) {
      b[4 + i](3 + rows[i], 3 + cols[i]) = 1.0;
      b[4 + i](3 + cols[i], 3 + rows[i]) = 1.0;
    }
    return b;
  }();
  return basis;
}
}  // namespace

IntervalModel::IntervalModel(const PinModel& m, const std::vector<int>& contact_frames,
                             const std::vector<int>& impulse_frames, double dt_, double mu, double accuracy,
                             int max_iter, int payload_joint, const Mat& payload_to_joint, const Vec& nominal_pi,
                             const Mat& actuator_groups, double coulomb_eps, bool gyro_bias, bool acc_bias,
                             const std::vector<int>& damped_frames, double kd, const std::vector<int>& point_frames,
                             bool rolling_contacts)
    : dt(dt_), model(m), contact_frames_(contact_frames), impulse_frames_(impulse_frames),
      damped_frames_(damped_frames), point_frames_(point_frames),
      rolling_contacts_(!point_frames.empty() && rolling_contacts), kd_(damped_frames.empty() ? 0.0 : kd), mu_(mu),
      accuracy_(accuracy), max_iter_(max_iter), payload_joint_(payload_joint), A_(payload_to_joint),
      nominal_pi_(nominal_pi), groups_(actuator_groups), eps_(coulomb_eps) {
  nq = model.nq;
  nv = model.nv;
  nx = nq + nv;
  ndx = 2 * nv;
  nb = model.joints[1].nv() == 6 ? 6 : 0;  // free-flyer root (as RobotModel builds it) or fixed base
  nj = nv - nb;
  nu = nj + 3 * static_cast<int>(point_frames_.size());
  nc = 3 * static_cast<int>(contact_frames_.size());
  ni = 3 * static_cast<int>(impulse_frames_.size());
  payload_on_universe_ = payload_joint_ == 0;
  reg_cols_ = 10 * std::max(payload_joint_ - 1, 0);
  n_groups_ = groups_.size() ? static_cast<int>(groups_.cols()) : 0;
  n_act = 3 * n_groups_;
  npi = 10 + n_act;
  if (gyro_bias) { gyro_bias_ = npi; npi += 3; }
  if (acc_bias) { acc_bias_ = npi; npi += 3; }
  nominal_armature_ = model.armature;
  if (n_groups_ && groups_.rows() != nj) throw std::invalid_argument("actuator groups must have one row per joint");
  for (int f : damped_frames_)
    if (std::find(contact_frames_.begin(), contact_frames_.end(), f) == contact_frames_.end())
      throw std::invalid_argument("damped frames must be contact frames");
  if (kd_ < 0.0) throw std::invalid_argument("need kd >= 0");
  if (!point_frames_.empty()) {
    auto index = [&](int f) {
      const auto it = std::find(point_frames_.begin(), point_frames_.end(), f);
      if (it == point_frames_.end())
        throw std::invalid_argument("contact frame " + std::to_string(f) + " is not among the rolling feet's frames");
      return static_cast<int>(it - point_frames_.begin());
    };
    for (int f : contact_frames_) contact_points_.push_back(index(f));
    for (int f : impulse_frames_) impulse_points_.push_back(index(f));
  }
  payload_basis_.assign(10, Eigen::Matrix<double, 6, 6>::Zero());
  if (!payload_on_universe_)
    for (int j = 0; j < 10; ++j)
      for (int k = 0; k < 10; ++k) payload_basis_[j] += A_(k, j) * spatialInertiaBasis()[k];
}

void IntervalModel::addMeasurement(MeasurementSpec s) {
  switch (s.kind) {
    case MK::JointPosition:
    case MK::JointVelocity: s.nz = s.nr = nj; break;
    case MK::Orientation: s.nz = 4; s.nr = 3; needs_kin_ = true; break;
    case MK::SpecificForce: s.nz = s.nr = 3; needs_kin_ = true; uses_acc_ = true; break;
    case MK::Gyro:
    case MK::ContactVelocity: s.nz = s.nr = 3; needs_kin_ = true; break;
    case MK::BaseHeight: s.nz = s.nr = 1; break;
  }
  if (s.W.rows() != s.nr || s.W.cols() != s.nr) throw std::invalid_argument("measurement W has the wrong size");
  if (s.point_index >= 0) {
    if (s.kind != MK::ContactVelocity) throw std::invalid_argument("only a contact velocity measures a foot's point");
    if (s.point_index >= static_cast<int>(point_frames_.size()) || point_frames_[s.point_index] != s.frame_id)
      throw std::invalid_argument("contact velocity of frame " + std::to_string(s.frame_id) + ": point index " +
                                  std::to_string(s.point_index) + " is not that foot's among the rolling feet");
  }
  if (s.bias_start >= 0 && s.bias_start + 3 > npi) throw std::invalid_argument("measurement bias outside pi");
  if (s.realised) {
    if (s.kind != MK::SpecificForce) throw std::invalid_argument("only an accelerometer measures the realised acceleration");
    if (nb != 6 || model.frames.at(s.frame_id).parentJoint != 1)
      throw std::invalid_argument("a realised-acceleration accelerometer must be on the floating base");
    noise_coupled = true;
  }
  s.WtW.noalias() = s.W.transpose() * s.W;
  z_offsets.push_back(nz);
  r_offsets.push_back(nr);
  nz += s.nz;
  nr += s.nr;
  measurements.push_back(std::move(s));
}

namespace {
bool equal(const Mat& a, const Mat& b) { return a.rows() == b.rows() && a.cols() == b.cols() && a == b; }

// rotation of a frame (world <- frame) from its joint's placement in kin: the measurements use a few frames, where
// updateFramePlacements costs as much as the kinematics pass (all of the robot's frames)
Mat3 frameRotation(const PinModel& m, const PinData& kin, int frame_id) {
  const pin::Frame& f = m.frames[frame_id];
  return kin.oMi[f.parentJoint].rotation() * f.placement.rotation();
}

// the linearisation's scratch matrices, one set per thread (whatever a call needs later is copied out within it):
// kept out of the knots' data, because the knots' working set over an iteration exceeds the caches. Each is sized on
// first use (no allocation afterwards, as long as the models' sizes do not change)
struct DiffScratch {
  Mat v_dq, v_dv, a_dq, a_dv, a_da, jac;       // frame derivatives (6, nv)
  Mat dh_dx, dh_dpi;                           // specific-force Jacobians (3, ndx), (3, npi)
  Mat y_reg, reg;                              // the payload parent joint's regressor columns (nv, 10), times A
  std::vector<pin::Force> fext;                // contact forces on the joints (njoints), joint frames (N, N m)
  Mat id_dx, id_da, ddq_dx;                    // inverse dynamics' derivatives in x (nv, ndx), in a (nv, nv); da/dx
  Mat p_dq;                                    // a contact point's velocity derivative (3, nv), not used
};

void fit(Mat& m, Eigen::Index rows, Eigen::Index cols) {
  if (m.rows() != rows || m.cols() != cols) m.setZero(rows, cols);
}

DiffScratch& diffScratch(const IntervalModel& m) {
  thread_local DiffScratch s;
  for (Mat* f : {&s.v_dq, &s.v_dv, &s.a_dq, &s.a_dv, &s.a_da, &s.jac}) fit(*f, 6, m.nv);
  fit(s.dh_dx, 3, m.ndx);
  fit(s.dh_dpi, 3, m.npi);
  fit(s.y_reg, m.nv, 10);
  fit(s.reg, m.nv, 10);
  fit(s.id_dx, m.nv, m.ndx);
  fit(s.id_da, m.nv, m.nv);
  fit(s.ddq_dx, m.nv, m.ndx);
  fit(s.p_dq, 3, m.nv);
  if (s.fext.size() != m.model.joints.size()) s.fext.assign(m.model.joints.size(), pin::Force::Zero());
  return s;
}

// a frame's LOCAL velocity and classical acceleration from what constraintDynamics leaves in pd: oMi, ov (world), J
// (world), oa (world, the drift without the ddq term: forwardKinematics' a_i = oMi^-1 (oa_i + sum J_j ddq_j over
// the supporting joints j)). The same quantities as getFrameVelocity / getFrameClassicalAcceleration after
// forwardKinematics(q, v, ddq), without the kinematics pass (all of the robot's joints) for the few measured frames
pin::Motion frameVelocityFromDynamics(const PinModel& m, const PinData& pd, int frame_id) {
  const pin::Frame& f = m.frames[frame_id];
  return f.placement.actInv(pd.oMi[f.parentJoint].actInv(pd.ov[f.parentJoint]));
}

Vec3 frameClassicalAccelerationFromDynamics(const PinModel& m, const PinData& pd, const Vec& ddq, int frame_id) {
  const pin::Frame& f = m.frames[frame_id];
  const pin::JointIndex j = f.parentJoint;
  Eigen::Matrix<double, 6, 1> oa = pd.oa[j].toVector();
  for (const pin::JointIndex i : m.supports[j])
    if (i > 0) oa.noalias() += pd.J.middleCols(m.idx_vs[i], m.nvs[i]) * ddq.segment(m.idx_vs[i], m.nvs[i]);
  const pin::Motion a = f.placement.actInv(pd.oMi[j].actInv(pin::Motion(oa)));
  const pin::Motion v = frameVelocityFromDynamics(m, pd, frame_id);
  return a.linear() + v.angular().cross(v.linear());
}

// the joint-torque regressor's columns of joint j's body (nv, 10) from kinematics at (q, v, a) (kin: v, a, oMi, J):
// the body's force regressor Y(v_j, a_j - g_j) (gravity as an upward acceleration, as computeJointTorqueRegressor)
// mapped to the supporting joints' torques, J_i^T (0X_j^* Y) in world axes, zero on the other joints
void bodyTorqueRegressor(const PinModel& m, const PinData& kin, int j, Eigen::Ref<Mat> out) {
  const pin::Motion a_gf = kin.a[j] - kin.oMi[j].actInv(m.gravity);
  const Eigen::Matrix<double, 6, 10> world = kin.oMi[j].toDualActionMatrix() * pin::bodyRegressor(kin.v[j], a_gf);
  out.setZero();
  for (const pin::JointIndex i : m.supports[j])
    if (i > 0)
      out.middleRows(m.idx_vs[i], m.nvs[i]).noalias() = kin.J.middleCols(m.idx_vs[i], m.nvs[i]).transpose() * world;
}
}  // namespace

// the Jacobians of the point-contact dynamics a(q, v, tau) of constraintDynamics (Baumgarte Kp 0; a damped contact's
// Kd adds kd times its point velocity to the constraint, IntervalModel::constraintModels) into pd.ddq_dq, pd.ddq_dv,
// pd.ddq_dtau (nv, nv), by Crocoddyl's KKT
// route: the inverse dynamics' derivatives ID_x (nv, ndx) at (q, v, a) with the contact forces as external forces
// (a, lambda held), the contact points' classical acceleration derivatives c_x (nc, ndx; LOCAL, a held) and
// c_a = J (nc, nv); with G = P J M^-1 (nc, nv)
//   da/dtau = M^-1 - (J M^-1)^T G,   da/dx = -(da/dtau) ID_x - G^T c_x.
// P (nc, nc) is the derivative of the proximal solve (settings: mu, iter = the iterations the forward pass made):
// lambda_{k+1} = (J M^-1 J^T + mu)^-1 (mu lambda_k + b) gives P = sum_{k < iter} mu^k osim^(k+1) with osim =
// (J M^-1 J^T + mu)^-1, what computeConstraintDynamicsDerivatives differentiates (the same quantity, round-off
// apart); P = (J M^-1 J^T)^-1 up to (mu |osim|)^iter (~1e-21 at mu 1e-8, 3 iterations: the rigid KKT inverse's
// top-left block), and finite for redundant contact sets like the forward pass. M^-1 from constraintDynamics'
// factorisation (pd.constraint_chol at this q; its mass-matrix block is undamped). Leaves pd as
// computeRNEADerivatives(q, v, a) does: oMi, liMi, v, a, ov, oa, J, dJ, dVdq, dAdq, dAdv at this (q, v, a), what
// computeForwardKinematicsDerivatives(q, v, a) leaves (the measurements read them). Scratch: jminv, g (nc, nv), osim,
// p, p_tmp (nc, nc) and schur (the knot's data), s
template <typename ConfigVector>
void contactDynamicsDerivatives(const PinModel& m, PinData& pd, const ConstraintModels& cms,
                                const ConstraintDatas& cds, const pin::ProximalSettings& settings,
                                const ConfigVector& q, const Vec& v, const Vec& a, IntervalData& d, DiffScratch& s) {
  const int nv = m.nv;
  for (pin::Force& f : s.fext) f.setZero();
  for (size_t k = 0; k < cms.size(); ++k)  // a point contact's force (contact frame) acting at the contact point
    s.fext[cms[k].joint1_id] += cms[k].joint1_placement.act(pin::Force(cds[k].contact_force.linear(), Vec3::Zero()));
  s.id_dx.setZero();  // written only where the two joints share a branch
  PIN_CALL(pin::computeRNEADerivatives(m, pd, q, v, a, s.fext, s.id_dx.leftCols(nv), s.id_dx.rightCols(nv), s.id_da));
  pd.dac_dq.setZero();  // written only on the supporting joints' columns
  pd.dac_dv.setZero();
  pd.dac_da.setZero();
  for (size_t k = 0; k < cms.size(); ++k) {
    const Eigen::Index r = 3 * static_cast<Eigen::Index>(k);
    const double kd = cms[k].m_baumgarte_parameters.Kd;
    if (kd != 0.0) s.p_dq.setZero();  // written only on the supporting joints' columns
    PIN_CALL(pin::getPointClassicAccelerationDerivatives(m, pd, cms[k].joint1_id, cms[k].joint1_placement, pin::LOCAL,
                                                         s.p_dq, pd.dac_dq.middleRows(r, 3),
                                                         pd.dac_dv.middleRows(r, 3), pd.dac_da.middleRows(r, 3)));
    // a damped contact's constraint is c + kd v_c (v_c its point velocity, LOCAL: dv_c/dq = p_dq, dv_c/dv = J)
    if (kd != 0.0) {
      pd.dac_dq.middleRows(r, 3).noalias() += kd * s.p_dq;
      pd.dac_dv.middleRows(r, 3).noalias() += kd * pd.dac_da.middleRows(r, 3);
    }
  }
  PIN_CALL(pd.constraint_chol.getInverseMassMatrix(pd.Minv));
  d.jminv.noalias() = pd.dac_da * pd.Minv;
  d.osim.noalias() = d.jminv * pd.dac_da.transpose();
  d.osim.diagonal().array() += settings.mu;
  d.schur.compute(d.osim);
  d.osim.setIdentity();
  d.schur.solveInPlace(d.osim);
  d.kkt_p = d.osim;
  for (int it = 1; it < settings.iter; ++it) {
    d.kkt_p_tmp.noalias() = settings.mu * d.osim * d.kkt_p;
    d.kkt_p = d.osim + d.kkt_p_tmp;
  }
  d.kkt_g.noalias() = d.kkt_p * d.jminv;
  pd.ddq_dtau = pd.Minv;
  pd.ddq_dtau.noalias() -= d.jminv.transpose() * d.kkt_g;
  s.ddq_dx.noalias() = -pd.ddq_dtau * s.id_dx;
  s.ddq_dx.leftCols(nv).noalias() -= d.kkt_g.transpose() * pd.dac_dq;
  s.ddq_dx.rightCols(nv).noalias() -= d.kkt_g.transpose() * pd.dac_dv;
  pd.ddq_dq = s.ddq_dx.leftCols(nv);
  pd.ddq_dv = s.ddq_dx.rightCols(nv);
}

// a 1-DoF joint's block is a scalar: its row is scaled (the same products as the 1x1 matrix product, without a
// dynamic-size product's set-up per joint); larger blocks (the free flyer's 6x6) coefficient-wise (no GEMM set-up)
void jointBlockProduct(const PinModel& m, const Mat& B, const Eigen::Ref<const Mat>& M, Eigen::Ref<Mat> out) {
  for (int i = 1; i < m.njoints; ++i) {
    const int o = m.idx_vs[i], n = m.nvs[i];
    if (n == 1) out.row(o) = B(o, o) * M.row(o);
    else out.middleRows(o, n) = B.block(o, o, n, n).lazyProduct(M.middleRows(o, n));
  }
}

void jointBlockProductRight(const PinModel& m, const Eigen::Ref<const Mat>& M, const Mat& B, Eigen::Ref<Mat> out) {
  for (int i = 1; i < m.njoints; ++i) {
    const int o = m.idx_vs[i], n = m.nvs[i];
    if (n == 1) out.col(o) = B(o, o) * M.col(o);
    else out.middleCols(o, n) = M.middleCols(o, n).lazyProduct(B.block(o, o, n, n));
  }
}

void jointBlockProductT(const PinModel& m, const Mat& B, const Eigen::Ref<const Mat>& M, Eigen::Ref<Mat> out) {
  for (int i = 1; i < m.njoints; ++i) {
    const int o = m.idx_vs[i], n = m.nvs[i];
    if (n == 1) out.row(o) = B(o, o) * M.row(o);
    else out.middleRows(o, n) = B.block(o, o, n, n).transpose().lazyProduct(M.middleRows(o, n));
  }
}

// a 1-DoF joint's block inverts as a scalar, a free flyer's 6x6 block as a fixed-size matrix (no allocation)
void jointBlockInverse(const PinModel& m, const Mat& B, Mat& out) {
  out.setZero(B.rows(), B.cols());
  for (int i = 1; i < m.njoints; ++i) {
    const int o = m.idx_vs[i], n = m.nvs[i];
    if (n == 1) {
      out(o, o) = 1.0 / B(o, o);
    } else if (n == 6) {
      const Eigen::Matrix<double, 6, 6> b = B.block<6, 6>(o, o);
      out.block<6, 6>(o, o) = b.inverse();
    } else {
      out.block(o, o, n, n) = B.block(o, o, n, n).inverse();
    }
  }
}

bool IntervalModel::sameDynamics(const IntervalModel& o) const {
  if (this == &o) return true;
  return contact_frames_ == o.contact_frames_ && impulse_frames_ == o.impulse_frames_ && dt == o.dt && mu_ == o.mu_ &&
         damped_frames_ == o.damped_frames_ && kd_ == o.kd_ && point_frames_ == o.point_frames_ &&
         rolling_contacts_ == o.rolling_contacts_ &&
         accuracy_ == o.accuracy_ && max_iter_ == o.max_iter_ &&
         payload_joint_ == o.payload_joint_ &&
         eps_ == o.eps_ && npi == o.npi && gyro_bias_ == o.gyro_bias_ && acc_bias_ == o.acc_bias_ &&
         equal(A_, o.A_) && equal(nominal_pi_, o.nominal_pi_) && equal(groups_, o.groups_) && model == o.model;
}

ConstraintModels IntervalModel::constraintModels(const PinModel& m, const std::vector<int>& frames,
                                                 bool with_kd) const {
  ConstraintModels out;
  for (int fid : frames) {
    const pin::Frame& f = m.frames[fid];
    out.emplace_back(pin::CONTACT_3D, m, f.parentJoint, f.placement, 0, pin::SE3::Identity(), pin::LOCAL);
    if (with_kd && std::find(damped_frames_.begin(), damped_frames_.end(), fid) != damped_frames_.end())
      out.back().m_baumgarte_parameters.Kd = kd_;
  }
  return out;
}

void IntervalModel::setContactPoints(IntervalData& d) const {
  auto place = [&](ConstraintModels& cms, const std::vector<int>& frames, const std::vector<int>& points) {
    for (size_t k = 0; k < cms.size(); ++k) {  // the rotation stays the frame's (constraintModels)
      const pin::SE3& f = d.model.frames[frames[k]].placement;
      cms[k].joint1_placement.translation().noalias() =
          f.translation() + f.rotation() * d.u.segment<3>(nj + 3 * points[k]);
    }
  };
  place(d.cmodels, contact_frames_, contact_points_);
  place(d.cmodels_imp, impulse_frames_, impulse_points_);
}

std::unique_ptr<IntervalData> IntervalModel::createData() const { return std::make_unique<IntervalData>(*this); }

IntervalData::IntervalData(const IntervalModel& m, std::shared_ptr<PinocchioState> shared)
    : state(shared ? std::move(shared) : std::make_shared<PinocchioState>(m.model)), model(state->model),
      pdata(state->pdata), aux(state->aux), pdata_imp(state->pdata_imp), kin_acc(state->kin_acc),
      cmodels(state->cmodels), cmodels_imp(state->cmodels_imp), cdatas(state->cdatas), cdatas_imp(state->cdatas_imp) {
  reset(m);
}

void IntervalData::reset(const IntervalModel& m) {
  const int nv = m.nv, ndx = m.ndx, npi = m.npi;
  // same robot: the assignments below keep the allocations (same sizes)
  u = Vec::Zero(m.nu);
  z = Vec::Zero(m.nz);
  xnext = Vec::Zero(m.nx);
  r = Vec::Zero(m.nr);
  Fx = Mat::Zero(m.ndx, m.ndx);
  Fp = Mat::Zero(m.ndx, m.npi);
  Rx = Mat::Zero(m.nr, m.ndx);
  Rp = Mat::Zero(m.nr, m.npi);
  if (m.noise_coupled)
    Rw = Mat::Zero(m.nr, nv);
  else
    Rw.resize(0, 0);
  model = m.model;
  settings = pinocchio::ProximalSettings(m.accuracy_, m.mu_, m.max_iter_);
  settings_imp = pinocchio::ProximalSettings(m.accuracy_, m.mu_, 1);
  cmodels = m.constraintModels(model, m.contact_frames_, true);
  cmodels_imp = m.constraintModels(model, m.impulse_frames_, false);
  if (!cmodels_imp.empty() && pdata_imp.joints.empty()) pdata_imp = PinData(model);
  cdatas.clear();
  cdatas_imp.clear();
  for (auto& cm : cmodels) cdatas.emplace_back(cm);
  for (auto& cm : cmodels_imp) cdatas_imp.emplace_back(cm);
  if (!cmodels.empty()) pin::initConstraintDynamics(model, pdata, cmodels, cdatas);
  if (!cmodels_imp.empty()) pin::initConstraintDynamics(model, pdata_imp, cmodels_imp, cdatas_imp);
  tau = Vec::Zero(nv);
  vdyn = Vec::Zero(nv);
  a = Vec::Zero(nv);
  lam = Vec::Zero(m.nc);
  vnext = Vec::Zero(nv);
  dq = Vec::Zero(nv);
  zero_v = Vec::Zero(nv);
  dv = Vec::Zero(nv);
  pi_joint = Vec::Zero(10);
  p_act = Vec::Zero(m.n_act);
  pi = Vec::Zero(npi);
  da_dx = Mat::Zero(nv, ndx);
  da_dtau = Mat::Zero(nv, nv);
  da_dpi = Mat::Zero(nv, npi);
  dvdyn_dx = Mat::Zero(nv, ndx);
  dvdyn_dx.rightCols(nv).setIdentity();
  dvdyn_dpi = Mat::Zero(nv, npi);
  jq = Mat::Zero(nv, nv);  // Pinocchio writes the joints' diagonal blocks only
  jv = Mat::Zero(nv, nv);
  proj = Mat::Zero(nv, nv);
  y_imp = Mat::Zero(nv, 10);
  minv = Mat::Zero(nv, nv);
  a_v = Mat::Zero(nv, nv);
  jminv = Mat::Zero(m.nc, nv);
  kkt_g = Mat::Zero(m.nc, nv);
  osim = Mat::Zero(m.nc, m.nc);
  kkt_p = Mat::Zero(m.nc, m.nc);
  kkt_p_tmp = Mat::Zero(m.nc, m.nc);
  if (schur.rows() != m.nc) schur = Eigen::LLT<Mat>(m.nc);  // a reset to the same contact count keeps its storage
  y_act = Mat::Zero(m.nj, m.n_act);
  h = Vec::Zero(m.nj > 3 ? m.nj : 3);
}

int IntervalData::pinocchioDatas() const {
  int n = 0;
  for (const PinData* p : {&pdata, &aux, &pdata_imp, &kin_acc}) n += p->joints.empty() ? 0 : 1;
  return n;
}

void IntervalModel::setParameters(IntervalData& d, const Vec& pi) const {
  d.pi = pi;
  if (n_groups_) {
    d.p_act = pi.segment(10, n_act);
    d.model.armature.tail(nj) = nominal_armature_.tail(nj) + groups_ * d.p_act.tail(n_groups_);
  }
  if (payload_on_universe_) return;
  d.pi_joint.noalias() = A_ * pi.head<10>();
  d.pi_joint += nominal_pi_;
  d.model.inertias[payload_joint_] = pin::Inertia::FromDynamicParameters(d.pi_joint);
}

void IntervalModel::forward(IntervalData& d, const Vec& x, const Vec& pi, bool diff) const {
  if (d.u.size() != nu) throw std::invalid_argument("u must have nu = " + std::to_string(nu) + " entries");
  setParameters(d, pi);
  const auto q = x.head(nq);
  const auto v = x.tail(nv);
  if (rolling_contacts_) setContactPoints(d);
  if (!impulse_frames_.empty()) {
    PIN_CALL(d.vdyn = pin::impulseDynamics(d.model, d.pdata_imp, q, v, d.cmodels_imp, d.cdatas_imp, 0.0, d.settings_imp));
  } else {
    d.vdyn = v;
  }
  d.tau.head(nb).setZero();
  d.tau.tail(nj) = d.u.head(nj);
  if (n_groups_) {
    const auto vj = d.vdyn.tail(nj);
    const Vec visc = groups_ * d.p_act.head(n_groups_);
    const Vec coul = groups_ * d.p_act.segment(n_groups_, n_groups_);
    d.tau.tail(nj).array() -= visc.array() * vj.array() + coul.array() * (vj.array() / eps_).tanh();
  }
  if (!contact_frames_.empty()) {
    PIN_CALL(d.a = pin::constraintDynamics(d.model, d.pdata, q, d.vdyn, d.tau, d.cmodels, d.cdatas, d.settings));
    d.lam = d.pdata.lambda_c;
  } else if (diff) {
    PIN_CALL(pin::computeABADerivatives(d.model, d.pdata, q, d.vdyn, d.tau));
    d.a = d.pdata.ddq;
  } else {
    PIN_CALL(d.a = pin::aba(d.model, d.pdata, q, d.vdyn, d.tau));
  }
  d.vnext = d.vdyn + dt * d.a;
  d.dq = dt * d.vnext;
  PIN_CALL(pin::integrate(d.model, q, d.dq, d.xnext.head(nq)));
  d.xnext.tail(nv) = d.vnext;
}

void IntervalModel::dynamicsDiff(IntervalData& d, const Vec& x) const {
  const auto q = x.head(nq);
  const auto v = x.tail(nv);
  const bool impulse = !impulse_frames_.empty(), contacts = !contact_frames_.empty();
  DiffScratch& s = diffScratch(*this);
  d.dvdyn_dpi.setZero();
  if (impulse) {
    PinData& pdi = d.pdata_imp;
    // computeImpulseDynamicsDerivatives reads dvc_dq before writing all of it (Pinocchio 4.1): left from the previous
    // call it makes the Jacobians depend on the data's history
    pdi.dvc_dq.setZero();
    PIN_CALL(pin::computeImpulseDynamicsDerivatives(d.model, pdi, d.cmodels_imp, d.cdatas_imp, 0.0, d.settings_imp));
    d.dvdyn_dx.leftCols(nv) = pdi.ddq_dq;
    d.dvdyn_dx.rightCols(nv) = pdi.ddq_dv;
    d.dvdyn_dx.rightCols(nv).diagonal().array() += 1.0;
    d.proj = pdi.ddq_dv;
    d.proj.diagonal().array() += 1.0;
    d.dv = d.vdyn - v;
    if (!payload_on_universe_ || n_groups_) {
      PIN_CALL(pin::computeMinverse(d.model, d.aux, q));
      d.minv = d.aux.Minv;
      d.minv.triangularView<Eigen::StrictlyLower>() = d.minv.transpose();
    }
    if (!payload_on_universe_) {
      PIN_CALL(pin::computeJointTorqueRegressor(d.model, d.aux, q, d.zero_v, d.dv));
      d.y_imp = d.aux.jointTorqueRegressor.middleCols(reg_cols_, 10);
      PIN_CALL(pin::computeJointTorqueRegressor(d.model, d.aux, q, d.zero_v, d.zero_v));
      d.y_imp -= d.aux.jointTorqueRegressor.middleCols(reg_cols_, 10);
      d.dvdyn_dpi.leftCols(10).noalias() = -d.proj * (d.minv * (d.y_imp * A_));
    }
    if (n_groups_) {  // rotor inertia in the impulse: columns a_j -> (v+ - v)_j
      d.y_act.setZero();
      d.y_act.rightCols(n_groups_) = d.dv.tail(nj).asDiagonal() * groups_;
      d.dvdyn_dpi.middleCols(10, n_act).noalias() = -d.proj * (d.minv.rightCols(nj) * d.y_act);
    }
  }
  PinData& pd = d.pdata;
  if (contacts) {
    MCOE_TIMED("contactDynamicsDerivatives",
               contactDynamicsDerivatives(d.model, pd, d.cmodels, d.cdatas, d.settings, q, d.vdyn, d.a, d, s));
    d.da_dtau = pd.ddq_dtau;
  } else {
    d.da_dtau = pd.Minv;
  }
  d.a_v = pd.ddq_dv;
  d.da_dpi.setZero();
  if (!payload_on_universe_) {
    if (kinematicsFromDynamics()) {
      PIN_CALL(bodyTorqueRegressor(d.model, pd, payload_joint_, s.y_reg));
    } else {
      PIN_CALL(pin::computeJointTorqueRegressor(d.model, d.aux, q, d.vdyn, d.a));
      s.y_reg = d.aux.jointTorqueRegressor.middleCols(reg_cols_, 10);
    }
    s.reg.noalias() = s.y_reg * A_;
    d.da_dpi.leftCols(10).noalias() = -d.da_dtau * s.reg;
  }
  if (n_groups_) {
    const auto vj = d.vdyn.tail(nj);
    const Vec visc = groups_ * d.p_act.head(n_groups_);
    const Vec coul = groups_ * d.p_act.segment(n_groups_, n_groups_);
    const Eigen::ArrayXd th = (vj.array() / eps_).tanh();
    const Vec dloss = (visc.array() + coul.array() * (1.0 - th * th) / eps_).matrix();
    d.a_v.rightCols(nj) -= d.da_dtau.rightCols(nj) * dloss.asDiagonal();
    d.y_act.leftCols(n_groups_) = vj.asDiagonal() * groups_;
    d.y_act.middleCols(n_groups_, n_groups_) = th.matrix().asDiagonal() * groups_;
    d.y_act.rightCols(n_groups_) = d.a.tail(nj).asDiagonal() * groups_;
    d.da_dpi.middleCols(10, n_act).noalias() = -d.da_dtau.rightCols(nj) * d.y_act;
  }
  if (impulse) {
    d.da_dx.noalias() = d.a_v * d.dvdyn_dx;
    d.da_dx.leftCols(nv) += pd.ddq_dq;
    d.da_dpi.noalias() += d.a_v * d.dvdyn_dpi;
  } else {
    d.da_dx.leftCols(nv) = pd.ddq_dq;
    d.da_dx.rightCols(nv) = d.a_v;
  }
  // v' = v+ + dt a ;  q' = q (+) dt v'
  auto dvn_dx = d.Fx.bottomRows(nv);
  auto dvn_dpi = d.Fp.bottomRows(nv);
  if (impulse) {
    dvn_dx = dt * d.da_dx + d.dvdyn_dx;
    dvn_dpi = dt * d.da_dpi + d.dvdyn_dpi;
  } else {  // v+ = v: dvdyn_dx = [0 I], dvdyn_dpi = 0 (the same sums, without reading them)
    dvn_dx = dt * d.da_dx;
    dvn_dx.rightCols(nv).diagonal().array() += 1.0;
    dvn_dpi = dt * d.da_dpi;
  }
  PIN_CALL(pin::dIntegrate(d.model, q, d.dq, d.jq, pin::ARG0));
  PIN_CALL(pin::dIntegrate(d.model, q, d.dq, d.jv, pin::ARG1));
  d.jv *= dt;
  jointBlockProduct(d.model, d.jv, dvn_dx, d.Fx.topRows(nv));
  d.Fx.topLeftCorner(nv, nv) += d.jq;
  jointBlockProduct(d.model, d.jv, dvn_dpi, d.Fp.topRows(nv));
}

void IntervalModel::kinematics(IntervalData& d, const Vec& x, bool diff) const {
  if (!needs_kin_ || kinematicsFromDynamics()) return;
  const auto q = x.head(nq);
  const auto v = x.tail(nv);
  auto fk = [&](PinData& data, const Eigen::Ref<const Vec>& vv, const Eigen::Ref<const Vec>& aa) {
    if (diff) PIN_CALL(pin::computeForwardKinematicsDerivatives(d.model, data, q, vv, aa));
    else PIN_CALL(pin::forwardKinematics(d.model, data, q, vv, aa));
  };
  // d.aux is free here: dynamicsDiff copied M^-1 and the regressor out of it
  if (!impulse_frames_.empty()) {
    fk(d.aux, v, d.zero_v);
    if (uses_acc_) {
      if (d.kin_acc.joints.empty()) d.kin_acc = PinData(d.model);
      fk(d.kin_acc, d.vdyn, d.a);
    }
  } else {
    fk(kinematicsData(d), v, d.a);
  }
}

PinData& IntervalModel::kinematicsData(IntervalData& d) const {
  // at a stance knot without impulse, calc's measurements take the measured frames' kinematics from what
  // constraintDynamics leaves in pdata (frameVelocityFromDynamics, frameClassicalAccelerationFromDynamics, oMi):
  // no kinematics pass, and pdata is left as constraintDynamics leaves it for calcDiffAfterCalc
  return kinematicsFromDynamics() ? d.pdata : d.aux;
}

void IntervalModel::measure(IntervalData& d, const Vec& x, bool diff) const {
  const bool impulse = !impulse_frames_.empty();
  PinData& kin_x = kinematicsData(d);  // the knot's kinematics (see kinematics)
  PinData& kin_acc = impulse ? d.kin_acc : kin_x;
  const Eigen::Vector3d g = d.model.gravity.linear();
  DiffScratch& sc = diffScratch(*this);
  const bool from_dynamics = !diff && kinematicsFromDynamics();  // calc: kin_x holds constraintDynamics' fields only
  for (size_t i = 0; i < measurements.size(); ++i) {
    const MeasurementSpec& s = measurements[i];
    const int zo = z_offsets[i], ro = r_offsets[i], n = s.nr;
    auto r = d.r.segment(ro, n);
    auto Rx = d.Rx.middleRows(ro, n);
    auto Rp = d.Rp.middleRows(ro, n);
    auto h = d.h.head(n);
    switch (s.kind) {
      case MK::JointPosition:
        h = x.segment(nq - nj, nj);
        r.noalias() = s.W * (d.z.segment(zo, n) - h);
        if (diff) { Rx.setZero(); Rx.middleCols(nv - nj, nj) = -s.W; }
        break;
      case MK::JointVelocity:
        h = x.tail(nj);
        r.noalias() = s.W * (d.z.segment(zo, n) - h);
        if (diff) { Rx.setZero(); Rx.rightCols(nj) = -s.W; }
        break;
      case MK::Gyro:
      case MK::ContactVelocity: {
        const bool angular = s.kind == MK::Gyro;
        const pin::Motion vel = from_dynamics ? frameVelocityFromDynamics(d.model, kin_x, s.frame_id)
                                              : pin::getFrameVelocity(d.model, kin_x, s.frame_id, pin::LOCAL);
        h = angular ? Vec(vel.angular()) : Vec(vel.linear());
        // a rolling foot's point p (foot frame, m): its LOCAL velocity v + w x p, d/dx = dv/dx - [p]x dw/dx
        const bool point = s.point_index >= 0;
        const Vec3 p = point ? Vec3(d.u.segment<3>(nj + 3 * s.point_index)) : Vec3::Zero();
        if (point) h += vel.angular().cross(p);
        if (s.bias_start >= 0) h += d.pi.segment<3>(s.bias_start);
        r.noalias() = s.W * (d.z.segment(zo, n) - h);
        if (diff) {
          sc.v_dq.setZero();  // Pinocchio fills only the columns of the frame's supporting joints
          sc.v_dv.setZero();
          PIN_CALL(pin::getFrameVelocityDerivatives(d.model, kin_x, s.frame_id, pin::LOCAL, sc.v_dq, sc.v_dv));
          if (point) {  // rows 0:3 and 3:6 are disjoint: no aliasing
            const Mat3 px = pin::skew(p);
            sc.v_dq.topRows<3>().noalias() -= px * sc.v_dq.bottomRows<3>();
            sc.v_dv.topRows<3>().noalias() -= px * sc.v_dv.bottomRows<3>();
          }
          const int row = angular ? 3 : 0;
          // 3-row products: coefficient-wise (a dynamic-size GEMM's set-up costs more than the product)
          Rx.leftCols(nv) = -s.W.lazyProduct(sc.v_dq.middleRows(row, 3));
          Rx.rightCols(nv) = -s.W.lazyProduct(sc.v_dv.middleRows(row, 3));
          if (s.bias_start >= 0) { Rp.setZero(); Rp.middleCols(s.bias_start, 3) = -s.W; }
        }
        break;
      }
      case MK::BaseHeight: {
        h[0] = x[2];
        r.noalias() = s.W * (d.z.segment(zo, n) - h);
        if (diff) {  // the base's local translation moves the height by R_WB[2]; its rotation does not (first order)
          const Eigen::Quaterniond quat(x[6], x[3], x[4], x[5]);
          Rx.setZero();
          Rx.leftCols(3) = -s.W(0, 0) * quat.normalized().toRotationMatrix().row(2);
        }
        break;
      }
      case MK::Orientation: {
        const auto zq = d.z.segment(zo, 4);
        Eigen::Quaterniond quat = s.quat_wxyz ? Eigen::Quaterniond(zq[0], zq[1], zq[2], zq[3])
                                              : Eigen::Quaterniond(zq[3], zq[0], zq[1], zq[2]);
        quat.normalize();
        const Mat3 err = frameRotation(d.model, kin_x, s.frame_id).transpose() * quat.toRotationMatrix();
        const Vec3 e = pin::log3(err);
        r.noalias() = s.W * e;
        if (diff) {
          sc.jac.setZero();
          PIN_CALL(pin::getFrameJacobian(d.model, kin_x, s.frame_id, pin::LOCAL, sc.jac));
          Mat3 jlog;
          pin::Jlog3(err, jlog);
          Rx.setZero();
          Rx.leftCols(nv).noalias() = -s.W * (jlog * err.transpose() * sc.jac.bottomRows(3));
        }
        break;
      }
      case MK::SpecificForce: {
        const Mat3 rot = frameRotation(d.model, kin_acc, s.frame_id);
        if (!diff) {
          const Vec3 acc =
              from_dynamics
                  ? frameClassicalAccelerationFromDynamics(d.model, kin_acc, d.a, s.frame_id)
                  : Vec3(pin::getFrameClassicalAcceleration(d.model, kin_acc, s.frame_id, pin::LOCAL).linear());
          h = acc - rot.transpose() * g;
          if (s.bias_start >= 0) h += d.pi.segment<3>(s.bias_start);
          r.noalias() = s.W * (d.z.segment(zo, n) - h);
          break;
        }
        const pin::Motion vel = pin::getFrameVelocity(d.model, kin_acc, s.frame_id, pin::LOCAL);
        Eigen::Matrix<double, 3, 6> cross;
        cross.leftCols(3) = pin::skew(vel.angular());
        cross.rightCols(3) = pin::skew(Vec3(-vel.linear()));
        const Vec3 gb = rot.transpose() * g;
        h = pin::getFrameAcceleration(d.model, kin_acc, s.frame_id, pin::LOCAL).linear() +
            cross.leftCols(3) * vel.linear() - gb;
        sc.v_dq.setZero();  // only the supporting joints' columns are written
        sc.a_dq.setZero();
        sc.a_dv.setZero();
        sc.a_da.setZero();
        PIN_CALL(pin::getFrameAccelerationDerivatives(d.model, kin_acc, s.frame_id, pin::LOCAL, sc.v_dq, sc.a_dq,
                                                      sc.a_dv, sc.a_da));
        const Eigen::Matrix<double, 3, Eigen::Dynamic> df_dq =
            sc.a_dq.topRows(3) + cross * sc.v_dq - pin::skew(gb) * sc.a_da.bottomRows(3);
        const Eigen::Matrix<double, 3, Eigen::Dynamic> df_dvd = sc.a_dv.topRows(3) + cross * sc.a_da;
        auto& dh = sc.dh_dx;
        auto& dhp = sc.dh_dpi;
        dh.noalias() = sc.a_da.topRows(3) * d.da_dx;
        dh.leftCols(nv) += df_dq;
        dhp.noalias() = sc.a_da.topRows(3) * d.da_dpi;
        if (!impulse) {
          dh.rightCols(nv) += df_dvd;
        } else {
          dh.noalias() += df_dvd * d.dvdyn_dx;
          dhp.noalias() += df_dvd * d.dvdyn_dpi;
        }
        if (s.bias_start >= 0) {
          h += d.pi.segment<3>(s.bias_start);
          dhp.middleCols(s.bias_start, 3).setIdentity();
        }
        r.noalias() = s.W * (d.z.segment(zo, n) - h);
        Rx = -s.W.lazyProduct(dh);
        Rp = -s.W.lazyProduct(dhp);
        // realised acceleration a + n_v / dt: dr/dn_v = -W (df/da) / dt (df/da: the base frame's constant motion map)
        if (s.realised) d.Rw.middleRows(ro, n) = -s.W.lazyProduct(sc.a_da.topRows(3)) / dt;
        break;
      }
    }
  }
}

void IntervalModel::calc(IntervalData& d, const Vec& x, const Vec& pi) const {
  forward(d, x, pi, false);
  kinematics(d, x, false);
  measure(d, x, false);
}

void IntervalModel::calcDiff(IntervalData& d, const Vec& x, const Vec& pi) const {
  forward(d, x, pi, true);
  derivatives(d, x);
}

void IntervalModel::calcDiffAfterCalc(IntervalData& d, const Vec& x, const Vec& pi) const {
  if (contact_frames_.empty()) {
    forward(d, x, pi, true);  // without contacts calcDiff's forward differs (ABA derivatives)
  } else {
    setParameters(d, pi);  // the state's model may be shared: its parameters are those of the last call on it
  }
  derivatives(d, x);
}

void IntervalModel::derivatives(IntervalData& d, const Vec& x) const {
  MCOE_TIMED("IntervalModel::dynamicsDiff", dynamicsDiff(d, x));
  MCOE_TIMED("IntervalModel::kinematics", kinematics(d, x, true));
  MCOE_TIMED("IntervalModel::measure", measure(d, x, true));
}

void IntervalModel::velocityNoiseCovariance(const IntervalData& d, const Vec& torque_std, double floor_std,
                                            Mat& out) const {
  const Mat aj = d.da_dtau.rightCols(nj) * (dt * torque_std).asDiagonal();
  out.noalias() = aj * aj.transpose();
  out.diagonal().array() += floor_std * floor_std;
}


void IntervalModel::noiseCovarianceFactors(IntervalData& d, const Eigen::Ref<const Vec>& q, const Vec& torque_std,
                                           Mat& cov, Mat& Z, Mat& R) const {
  const Mat& a = d.da_dtau;
  velocityNoiseCovariance(d, torque_std, 0.0, cov);
  if (Z.rows() != nv || Z.cols() != 6 + nj) Z.setZero(nv, 6 + nj);
  if (R.rows() != 6 + nj || R.cols() != nv) R.setZero(6 + nj, nv);
  if (!payload_on_universe_) {
    thread_local Mat jac;
    jac.setZero(6, nv);
    PIN_CALL(pin::computeJointJacobian(d.model, d.aux, q, payload_joint_, jac));  // LOCAL
    Z.leftCols(6).noalias() = a * jac.transpose();
    R.topRows(6).noalias() = jac * cov;
  } else {
    Z.leftCols(6).setZero();
    R.topRows(6).setZero();
  }
  Z.rightCols(nj) = a.rightCols(nj);
  R.bottomRows(nj) = cov.bottomRows(nj);
}

bool IntervalModel::noiseMixing(const Eigen::Ref<const Vec>& c, Eigen::Matrix<double, 6, 6>& payload,
                                Vec& joints) const {
  // d I_joint / d pi_j = sum_k A[k, j] basis[k] (pi_joint = A pi + nominal); rotor inertia g: its joints' armature
  payload.setZero();
  bool any = false;
  if (!payload_on_universe_) {
    for (int j = 0; j < 10; ++j) {
      if (c[j] == 0.0) continue;
      any = true;
      payload += c[j] * payload_basis_[j];
    }
  }
  joints.setZero(nj);
  if (n_groups_) {
    const auto rotor = c.segment(10 + 2 * n_groups_, n_groups_);
    if (!rotor.isZero(0.0)) {
      any = true;
      joints.noalias() = groups_ * rotor;
    }
  }
  return any;
}

void IntervalModel::velocityNoiseCovarianceDerivative(IntervalData& d, const Eigen::Ref<const Vec>& q,
                                                      const Vec& torque_std, Mat& out) const {
  Mat cov, Z, R, x;
  noiseCovarianceFactors(d, q, torque_std, cov, Z, R);
  out.setZero(nv * nv, npi);
  Eigen::Matrix<double, 6, 6> b;
  Vec joints;
  for (int j = 0; j < npi; ++j) {
    if (!noiseMixing(Vec::Unit(npi, j), b, joints)) continue;
    x.noalias() = Z.leftCols(6) * (b * R.topRows(6));
    x.noalias() += Z.rightCols(nj) * joints.asDiagonal() * R.bottomRows(nj);
    Eigen::Map<Mat>(out.col(j).data(), nv, nv) = -(x + x.transpose());
  }
}

}  // namespace mcoe
