// Ground reaction forces of the feet from the joint-space dynamics of the legs (the contact detector's estimates,
// mcoe_ros.multibody.contact.ContactDetector: the inverse dynamics of forces_from_state and the momentum observer's
// per-sample terms): per input sample, so compiled.
#pragma once

#include <utility>
#include <vector>

#include <pinocchio/multibody.hpp>

#include "common.hpp"

namespace mcoe {

class ContactForces {
 public:
  // model: the robot; feet: foot frame ids (model foot order); legs: per foot, its 3 actuated velocity indices
  ContactForces(const pinocchio::Model& model, const std::vector<int>& feet, const std::vector<std::vector<int>>& legs);

  // Forces (nfeet, 3) on the robot, world axes, N, from the state q (nq), v (nv), a (nv) and the actuated-joint
  // torques tau (nv - nbase); armature (nv) replaces the model's rotor inertias. A singular leg gives zero.
  const RowMat& compute(const Vec& q, const Vec& v, const Vec& a, const Vec& tau, const Vec& armature);

  // The momentum observer's terms of one sample, leg rows in foot order (3 nfeet each): the reduced momentum
  // p = (M v)_legs and the right-hand side tau_legs - M_legs,lin s + (C(q, v)^T v)_legs, from q (nq), v (nv: the
  // sample's velocity with a zero base linear velocity), the actuated-joint torques after friction tau
  // (nv - nbase, N m), armature (nv) and the base origin's specific force s (3, m/s^2, base axes; for a floating
  // base, whose linear velocity is v[0:3]; empty without). Keeps the legs' J^T for solve() and jacobiansT().
  std::pair<const Vec&, const Vec&> momentum(const Vec& q, const Vec& v, const Vec& tau, const Vec& armature,
                                             const Vec& specific_force);

  // One momentum-observer step (ContactDetector._observe) in one call: this sample's p, rhs (momentum(), same
  // arguments), then in place r <- (1 - g) r + g ((p - p_prev) / dt - (rhs + rhs_prev) / 2) (r: the residual J^T f,
  // leg rows, N m; g: the filter weight min(K dt, 1); dt in s) and p_prev, rhs_prev <- p, rhs; returns solve(r).
  const RowMat& observe(const Vec& q, const Vec& v, const Vec& tau, const Vec& armature, const Vec& specific_force,
                        double dt, double g, Eigen::Ref<Vec> p_prev, Eigen::Ref<Vec> rhs_prev, Eigen::Ref<Vec> r);

  // Forces (nfeet, 3), world axes, N, from J^T f on the leg rows (3 nfeet, N m, foot order), with the legs' J^T of
  // the last compute() or momentum(). A singular leg gives zero.
  const RowMat& solve(const Vec& leg_torques);

  // The legs' J^T of the last compute() or momentum(), stacked per foot (3 nfeet, 3): row 3 i + r = joint r of
  // leg i, column = force axis (world).
  const RowMat& jacobiansT() const { return jac_t_; }

 private:
  void legJacobians(const Vec& q);  // jac_t_ at q
  pinocchio::Model model_;
  pinocchio::Data data_;
  std::vector<int> feet_;
  std::vector<std::vector<int>> legs_;
  Mat jac_;  // 6 x nv frame Jacobian scratch
  Vec rhs_, leg_rhs_, leg_p_;
  RowMat jac_t_;
  RowMat forces_;
};

}  // namespace mcoe
