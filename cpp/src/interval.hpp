// The multibody interval model of the estimator in C++: phase dynamics (free / rigid point contacts / landing impulse,
// semi-implicit Euler on the free-flyer group) with the actuator model, and the knot's measurement models, with their
// analytic Jacobians in x (tangent) and pi. Mirror of mcoe_ros.multibody.{dynamics, measurements, interval}: the
// Python classes are the reference the tests compare against (same pi layout, same conventions).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <pinocchio/multibody.hpp>
#include <pinocchio/algorithm/proximal.hpp>
#include <pinocchio/constraints.hpp>

#include "common.hpp"

namespace mcoe {

using PinModel = pinocchio::Model;
using PinData = pinocchio::Data;
using ConstraintModels = PINOCCHIO_STD_VECTOR_WITH_EIGEN_ALLOCATOR(pinocchio::RigidConstraintModel);
using ConstraintDatas = PINOCCHIO_STD_VECTOR_WITH_EIGEN_ALLOCATOR(pinocchio::RigidConstraintData);

struct MeasurementSpec {
  // BaseHeight: the base origin's world height, 1 row, z = the leg-odometry height (Python BaseHeight)
  enum class Kind {
    JointPosition, JointVelocity, Gyro, Orientation, SpecificForce, ContactVelocity, BaseHeight
  };
  Kind kind;
  int frame_id = -1;
  Mat W;               // square-root information (nr, nr)
  Mat WtW;             // W^T W (nr, nr): the joint encoders' Gauss-Newton block, set by IntervalModel::addMeasurement
  int bias_start = -1; // start of a 3-entry additive bias in pi (gyro, accelerometer), -1 = none
  bool quat_wxyz = true;
  // SpecificForce only: the accelerometer measures the interval's realised acceleration a + n_v / dt (n_v the
  // interval's velocity noise), so its residual depends on the noise: IntervalData::Rw (Python ImuSpecificForce's
  // realised); the frame must be on the floating base
  bool realised = false;
  // ContactVelocity only: the rolling foot's point k of u (IntervalModel's point_frames[k] = frame_id), h = v_L +
  // w_L x p_k (p_k (3,) m in the foot frame); -1: the frame origin
  int point_index = -1;
  int nz = 0, nr = 0;
};

class IntervalData;

// Products with a matrix B (nv, nv) that is block-diagonal by joint (the tangent maps of a configuration: dIntegrate,
// dDifference): out = B M and B^-1 from the joints' diagonal blocks only (a free-flyer's 6x6, a revolute joint's 1x1),
// ~10x fewer flops than the dense products on a legged robot
void jointBlockProduct(const PinModel& m, const Mat& B, const Eigen::Ref<const Mat>& M, Eigen::Ref<Mat> out);
// out = M B and out = B^T M
void jointBlockProductRight(const PinModel& m, const Eigen::Ref<const Mat>& M, const Mat& B, Eigen::Ref<Mat> out);
void jointBlockProductT(const PinModel& m, const Mat& B, const Eigen::Ref<const Mat>& M, Eigen::Ref<Mat> out);
void jointBlockInverse(const PinModel& m, const Mat& B, Mat& out);

class IntervalModel {
 public:
  // model: the robot (nominal payload body, nominal armature); contact/impulse: foot frame ids
  // damped_frames (a subset of contact_frames): contacts with the velocity gain kd (1/s), J a = -gamma - kd J v, a
  // landing over time (Python PhaseDynamicsModel's damped / kd)
  // point_frames: rolling feet, every foot frame in order (robot.foot_frame_ids), empty = off. With them u = [tau
  // (nj); p_0 (3); ...; p_{nf-1} (3)] (nu = nj + 3 nf), p_k (m) the contact point in foot frame k (the sphere's
  // lowest point at the knot): every contact / impulse constraint of foot k holds that point instead of the origin
  // (rolling_contacts; false: the constraints stay at the frames and the points serve the contact velocities only)
  IntervalModel(const PinModel& model, const std::vector<int>& contact_frames, const std::vector<int>& impulse_frames,
                double dt, double mu, double accuracy, int max_iter, int payload_joint, const Mat& payload_to_joint,
                const Vec& nominal_pi, const Mat& actuator_groups, double coulomb_eps, bool gyro_bias, bool acc_bias,
                const std::vector<int>& damped_frames = {}, double kd = 0.0,
                const std::vector<int>& point_frames = {}, bool rolling_contacts = true);
  void addMeasurement(MeasurementSpec spec);
  // same robot, phase (contact and impulse frames), dynamics options and pi layout: the models differ at most in
  // their measurements, and a data of one reset to the other gives a fresh data's results (same contact set)
  bool sameDynamics(const IntervalModel& o) const;

  std::unique_ptr<IntervalData> createData() const;
  void calc(IntervalData& d, const Vec& x, const Vec& pi) const;
  void calcDiff(IntervalData& d, const Vec& x, const Vec& pi) const;
  // calcDiff on data that already holds calc(d, x, pi) (same x, pi, u, z): the forward dynamics are not repeated
  // where calc and calcDiff evaluate them alike (rigid contacts)
  void calcDiffAfterCalc(IntervalData& d, const Vec& x, const Vec& pi) const;
  // velocity-noise covariance from white joint-torque noise (after calcDiff), see Python velocity_noise_covariance
  void velocityNoiseCovariance(const IntervalData& d, const Vec& torque_std, double floor_std, Mat& out) const;
  // the derivative of the torque-noise part Q = D D^T of that covariance (floor 0) with respect to pi at the last
  // calcDiff, at configuration q, in factored form: dQ/dpi_j = -(X_j + X_j^T) with X_j = A dM_j Q = Z C_j R (A =
  // da/dtau, dM_j = dM/dpi_j; Python PhaseDynamicsModel.velocity_noise_covariance_derivative), Z = [A J^T, A_j]
  // (nv, 6 + nj), R = [J Q; Q_j] (6 + nj, nv) with J the payload joint's LOCAL Jacobian and _j the joints' columns /
  // rows, C_j = blockdiag(dI/dpi_j (6, 6), diag(d armature/dpi_j) (nj, nj)) (noiseMixing). cov: Q. Uses d's aux data
  void noiseCovarianceFactors(IntervalData& d, const Eigen::Ref<const Vec>& q, const Vec& torque_std, Mat& cov,
                              Mat& Z, Mat& R) const;
  // the mixing C = sum_j c_j C_j of a combination c (npi,) of the parameters (e.g. a column of dpi/dtheta): the
  // payload block (6, 6) and the joints' diagonal (nj,); false if C = 0 (friction, biases)
  bool noiseMixing(const Eigen::Ref<const Vec>& c, Eigen::Matrix<double, 6, 6>& payload, Vec& joints) const;
  // the same densely: column j of out (nv * nv, npi) is vec(dQ/dpi_j) (zero for the parameters that do not change
  // the joint-space inertia M: friction, biases)
  void velocityNoiseCovarianceDerivative(IntervalData& d, const Eigen::Ref<const Vec>& q, const Vec& torque_std,
                                         Mat& out) const;
  // a realised-acceleration accelerometer is among the measurements: the residual depends on the interval's noise
  bool noise_coupled = false;

  int nq, nv, nj, nb, nx, ndx, npi, nu, nz = 0, nr = 0, nc, ni, n_act;
  double dt;
  std::vector<MeasurementSpec> measurements;
  std::vector<int> z_offsets, r_offsets;
  PinModel model;  // nominal robot (copied into every data)

 private:
  friend class IntervalData;
  void forward(IntervalData& d, const Vec& x, const Vec& pi, bool diff) const;
  // the Jacobians of calcDiff once the forward dynamics are evaluated (dynamicsDiff, kinematics, measure)
  void derivatives(IntervalData& d, const Vec& x) const;
  void dynamicsDiff(IntervalData& d, const Vec& x) const;
  void kinematics(IntervalData& d, const Vec& x, bool diff) const;
  void measure(IntervalData& d, const Vec& x, bool diff) const;
  void setParameters(IntervalData& d, const Vec& pi) const;
  // point contacts at the frames; with_kd: the damped frames get the velocity gain kd_
  ConstraintModels constraintModels(const PinModel& m, const std::vector<int>& frames, bool with_kd) const;
  // rolling feet: the constraints' joint1_placement = frame placement * SE3(I, p_k) from d.u (every calc)
  void setContactPoints(IntervalData& d) const;
  // stance knot without impulse: the contact dynamics' derivatives (computeRNEADerivatives) leave in pdata what
  // computeForwardKinematicsDerivatives(q, v, a) would (oMi, liMi, v, a, ov, oa, J, dJ at this very (q, v, a)), so
  // the linearisation takes the payload regressor and the measurements' kinematics from it (no second pass); calc
  // takes the measured frames' kinematics from constraintDynamics' world-frame fields (no kinematics pass either)
  bool kinematicsFromDynamics() const { return impulse_frames_.empty() && !contact_frames_.empty(); }
  // the data holding the knot's kinematics for the measurements: at such a stance knot pdata (calcDiff: from the
  // derivatives; calc: constraintDynamics' oMi, ov, oa, J), elsewhere aux
  PinData& kinematicsData(IntervalData& d) const;

  std::vector<int> contact_frames_, impulse_frames_, damped_frames_;
  // rolling feet (constructor's point_frames): the foot frames in u's point order; each contact / impulse frame's
  // point index in u (empty without rolling feet)
  std::vector<int> point_frames_, contact_points_, impulse_points_;
  // the contacts at u's points (false: at the foot frames; the points serve the contact velocities only)
  bool rolling_contacts_ = true;
  double kd_;
  double mu_, accuracy_;
  int max_iter_;
  int payload_joint_;
  bool payload_on_universe_;
  int reg_cols_;  // first regressor column of the payload's parent joint
  Mat A_;         // payload frame -> parent joint frame (10, 10)
  // d(spatial inertia of the payload's parent body, 6x6)/d(pi_j) for the 10 payload parameters (constant: pi enters
  // the joint's dynamic parameters linearly, A_ pi + nominal)
  std::vector<Eigen::Matrix<double, 6, 6>> payload_basis_;
  Vec nominal_pi_;
  Mat groups_;    // actuator: joint -> group incidence (nj, n_groups), empty without an actuator model
  double eps_;
  int n_groups_ = 0;
  Vec nominal_armature_;
  int gyro_bias_ = -1, acc_bias_ = -1;
  bool needs_kin_ = false, uses_acc_ = false;
};

// a knot's Pinocchio state: the robot with the parameters of the last calc / calcDiff (armature, payload inertia: set
// by every call) and the Pinocchio datas. A knot's linearisation data and its trial data share one (the solver
// evaluates a knot's two datas one after the other, never concurrently): one Pinocchio working set per knot, as
// a solver with one data per knot. Sharing keeps what calcDiffAfterCalc reads, because the trial that is accepted is
// the last call on the state before the next linearisation.
struct PinocchioState {
  explicit PinocchioState(const PinModel& m) : model(m), pdata(model), aux(model) {}
  // model: the dynamics' robot (~10x smaller than one pinocchio::Data); pdata: the forward dynamics (kept between
  // calc and calcDiffAfterCalc; at a stance knot without impulse also the knot's kinematics, after calc and after
  // calcDiff); aux: scratch within one call, first for M^-1 and the regressor (copied out), then the knot's
  // kinematics for the measurements (the others); pdata_imp: the impulse (only with impulse frames); kin_acc:
  // kinematics after the impulse (only with impulse frames and a specific force, allocated on first use)
  PinModel model;
  PinData pdata, aux, pdata_imp, kin_acc;
  ConstraintModels cmodels, cmodels_imp;
  ConstraintDatas cdatas, cdatas_imp;
};

class IntervalData {
 public:
  // shared: the Pinocchio state of another data of the same model (a knot's trial shares its linearisation data's),
  // null: an own state
  explicit IntervalData(const IntervalModel& m, std::shared_ptr<PinocchioState> shared = nullptr);
  // every member but the pinocchio::Data (pdata, aux, pdata_imp / kin_acc if present) to m's fresh values (the
  // constructor's body). Not a fresh data when the Data were used with another contact set: Pinocchio keeps state
  // there (the results differ, test/test_compiled_memory.py), so the shift does not recycle data across phases
  void reset(const IntervalModel& m);
  // the Pinocchio state (declared first: the references below point into it)
  std::shared_ptr<PinocchioState> state;
  // inputs and results (as the Python IntervalData)
  Vec u, z, xnext, r;
  Mat Fx, Fp, Rx, Rp;
  // (nr, nv) dr/dn_v of a noise-coupled model (IntervalModel::noise_coupled), set by calcDiff; empty otherwise
  Mat Rw;
  // number of allocated pinocchio::Data held by this data's state (2 without impulse; +1 impulse, +1 kinematics
  // after the impulse when a specific force is measured)
  int pinocchioDatas() const;
  // the state's members (see PinocchioState)
  PinModel& model;
  PinData &pdata, &aux, &pdata_imp, &kin_acc;
  ConstraintModels &cmodels, &cmodels_imp;
  ConstraintDatas &cdatas, &cdatas_imp;
  pinocchio::ProximalSettings settings, settings_imp;
  Vec tau, vdyn, a, lam, vnext, dq, zero_v, dv, pi_joint, p_act, pi;
  Mat da_dx, da_dtau, da_dpi, dvdyn_dx, dvdyn_dpi, proj, y_imp, minv, a_v, y_act;
  // the contact dynamics' Jacobians (interval.cpp contactDynamicsDerivatives): J M^-1 and G = P J M^-1 (nc, nv);
  // osim = (J M^-1 J^T + mu)^-1, the proximal solve's derivative P and a product (nc, nc); the Cholesky factor of
  // J M^-1 J^T + mu
  Mat jminv, kkt_g, osim, kkt_p, kkt_p_tmp;
  Eigen::LLT<Mat> schur;
  // dIntegrate's Jacobians at (q, dq = dt v') of the last calcDiff, joint-block-diagonal (nv, nv): jq = d(q (+) dq)/dq,
  // jv = dt d(q (+) dq)/d(dq); Fx's configuration rows are [jq 0] + jv Fx's velocity rows (the solver factors A so)
  Mat jq, jv;
  // measurement scratch (the linearisation's matrix scratch is per thread, interval.cpp DiffScratch)
  Vec h;
};

}  // namespace mcoe
