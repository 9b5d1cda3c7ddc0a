// Ground reaction forces of the feet from the joint-space dynamics of the legs (the contact detector's estimate,
// mcoe_ros.multibody.contact.ContactDetector.forces_from_state): per input sample, so compiled.
#pragma once

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

 private:
  pinocchio::Model model_;
  pinocchio::Data data_;
  std::vector<int> feet_;
  std::vector<std::vector<int>> legs_;
  Mat jac_;  // 6 x nv frame Jacobian scratch
  Vec rhs_;
  RowMat forces_;
};

}  // namespace mcoe
