#include "contact_forces.hpp"

#include <pinocchio/algorithm/frames.hpp>
#include <pinocchio/algorithm/jacobian.hpp>
#include <pinocchio/algorithm/rnea.hpp>

#include <stdexcept>

namespace mcoe {

ContactForces::ContactForces(const pinocchio::Model& model, const std::vector<int>& feet,
                             const std::vector<std::vector<int>>& legs)
    : model_(model), data_(model), feet_(feet), legs_(legs) {
  if (feet.size() != legs.size()) throw std::invalid_argument("ContactForces: one leg per foot");
  for (const auto& leg : legs)
    if (leg.size() != 3) throw std::invalid_argument("ContactForces: a leg has 3 joints");
  jac_.setZero(6, model.nv);
  rhs_.setZero(model.nv);
  forces_.setZero(static_cast<Eigen::Index>(feet.size()), 3);
}

const RowMat& ContactForces::compute(const Vec& q, const Vec& v, const Vec& a, const Vec& tau, const Vec& armature) {
  const Eigen::Index nv = model_.nv, nj = tau.size();
  if (q.size() != model_.nq || v.size() != nv || a.size() != nv || armature.size() != nv || nj > nv)
    throw std::invalid_argument("ContactForces.compute: wrong sizes");
  model_.armature = armature;
  rhs_ = pinocchio::rnea(model_, data_, q, v, a);  // = tau + J^T f on the leg rows
  rhs_.tail(nj) -= tau;
  pinocchio::computeJointJacobians(model_, data_, q);
  pinocchio::updateFramePlacements(model_, data_);
  for (std::size_t i = 0; i < feet_.size(); ++i) {
    jac_.setZero();
    pinocchio::getFrameJacobian(model_, data_, static_cast<pinocchio::FrameIndex>(feet_[i]),
                                pinocchio::LOCAL_WORLD_ALIGNED, jac_);
    Mat3 jt;  // J_leg^T: row r = joint r of the leg, column = force axis
    Vec3 b;
    for (int r = 0; r < 3; ++r) {
      const int col = legs_[i][r];
      jt.row(r) = jac_.block<3, 1>(0, col).transpose();
      b(r) = rhs_(col);
    }
    Eigen::PartialPivLU<Mat3> lu(jt);
    if (lu.matrixLU().diagonal().cwiseAbs().minCoeff() > 0.0)  // as LAPACK's solve: only an exact zero pivot fails
      forces_.row(static_cast<Eigen::Index>(i)) = lu.solve(b).transpose();
    else
      forces_.row(static_cast<Eigen::Index>(i)).setZero();
  }
  return forces_;
}

}  // namespace mcoe
