#include "contact_forces.hpp"

#include <pinocchio/algorithm/crba.hpp>
#include <pinocchio/algorithm/frames.hpp>
#include <pinocchio/algorithm/jacobian.hpp>
#include <pinocchio/algorithm/rnea.hpp>

#include <stdexcept>

namespace mcoe {

ContactForces::ContactForces(const pinocchio::Model& model, const std::vector<int>& feet,
                             const std::vector<std::vector<int>>& legs)
    : model_(model), data_(model), feet_(feet), legs_(legs) {
  if (feet.size() != legs.size()) throw std::invalid_argument("ContactForces: one leg per foot");
  for (const auto& leg : legs) {
    if (leg.size() != 3) throw std::invalid_argument("ContactForces: a leg has 3 joints");
    for (int c : leg)
      if (c < 0 || c >= model.nv) throw std::invalid_argument("ContactForces: a leg column is out of range");
  }
  const auto rows = static_cast<Eigen::Index>(3 * feet.size());
  jac_.setZero(6, model.nv);
  rhs_.setZero(model.nv);
  leg_rhs_.setZero(rows);
  leg_p_.setZero(rows);
  jac_t_.setZero(rows, 3);
  forces_.setZero(static_cast<Eigen::Index>(feet.size()), 3);
}

void ContactForces::legJacobians(const Vec& q) {
  pinocchio::computeJointJacobians(model_, data_, q);
  pinocchio::updateFramePlacements(model_, data_);
  for (std::size_t i = 0; i < feet_.size(); ++i) {
    jac_.setZero();
    pinocchio::getFrameJacobian(model_, data_, static_cast<pinocchio::FrameIndex>(feet_[i]),
                                pinocchio::LOCAL_WORLD_ALIGNED, jac_);
    for (int r = 0; r < 3; ++r)  // J_leg^T: row r = joint r of the leg, column = force axis
      jac_t_.row(static_cast<Eigen::Index>(3 * i + r)) = jac_.block<3, 1>(0, legs_[i][r]).transpose();
  }
}

const RowMat& ContactForces::solve(const Vec& leg_torques) {
  if (leg_torques.size() != jac_t_.rows()) throw std::invalid_argument("ContactForces.solve: wrong size");
  for (std::size_t i = 0; i < feet_.size(); ++i) {
    const auto k = static_cast<Eigen::Index>(i);
    Eigen::PartialPivLU<Mat3> lu(Mat3(jac_t_.block<3, 3>(3 * k, 0)));
    if (lu.matrixLU().diagonal().cwiseAbs().minCoeff() > 0.0)  // as LAPACK's solve: only an exact zero pivot fails
      forces_.row(k) = lu.solve(Vec3(leg_torques.segment<3>(3 * k))).transpose();
    else
      forces_.row(k).setZero();
  }
  return forces_;
}

const RowMat& ContactForces::compute(const Vec& q, const Vec& v, const Vec& a, const Vec& tau, const Vec& armature) {
  const Eigen::Index nv = model_.nv, nj = tau.size();
  if (q.size() != model_.nq || v.size() != nv || a.size() != nv || armature.size() != nv || nj > nv)
    throw std::invalid_argument("ContactForces.compute: wrong sizes");
  model_.armature = armature;
  rhs_ = pinocchio::rnea(model_, data_, q, v, a);  // = tau + J^T f on the leg rows
  rhs_.tail(nj) -= tau;
  legJacobians(q);
  for (std::size_t i = 0; i < feet_.size(); ++i)
    for (int r = 0; r < 3; ++r) leg_rhs_(static_cast<Eigen::Index>(3 * i + r)) = rhs_(legs_[i][r]);
  return solve(leg_rhs_);
}

std::pair<const Vec&, const Vec&> ContactForces::momentum(const Vec& q, const Vec& v, const Vec& tau,
                                                          const Vec& armature, const Vec& specific_force) {
  const Eigen::Index nv = model_.nv, nj = tau.size();
  if (q.size() != model_.nq || v.size() != nv || armature.size() != nv || nj > nv ||
      (specific_force.size() != 0 && (specific_force.size() != 3 || nv < 3)))
    throw std::invalid_argument("ContactForces.momentum: wrong sizes");
  model_.armature = armature;
  pinocchio::crba(model_, data_, q);  // upper triangle, armature on the diagonal
  data_.M.triangularView<Eigen::StrictlyLower>() = data_.M.transpose();
  rhs_.setZero();
  rhs_.tail(nj) = tau;
  for (std::size_t i = 0; i < feet_.size(); ++i)
    for (int r = 0; r < 3; ++r) {
      const int col = legs_[i][r];
      const auto k = static_cast<Eigen::Index>(3 * i + r);
      leg_p_(k) = data_.M.row(col).dot(v);
      leg_rhs_(k) = rhs_(col);
      if (specific_force.size()) leg_rhs_(k) -= data_.M.row(col).head<3>().dot(specific_force);
    }
  pinocchio::computeCoriolisMatrix(model_, data_, q, v);
  for (std::size_t i = 0; i < feet_.size(); ++i)
    for (int r = 0; r < 3; ++r) leg_rhs_(static_cast<Eigen::Index>(3 * i + r)) += data_.C.col(legs_[i][r]).dot(v);
  legJacobians(q);
  return {leg_p_, leg_rhs_};
}

const RowMat& ContactForces::observe(const Vec& q, const Vec& v, const Vec& tau, const Vec& armature,
                                    const Vec& specific_force, double dt, double g, Eigen::Ref<Vec> p_prev,
                                    Eigen::Ref<Vec> rhs_prev, Eigen::Ref<Vec> r) {
  const Eigen::Index rows = jac_t_.rows();
  if (p_prev.size() != rows || rhs_prev.size() != rows || r.size() != rows || !(dt > 0.0))
    throw std::invalid_argument("ContactForces.observe: wrong sizes or dt <= 0");
  momentum(q, v, tau, armature, specific_force);
  r *= 1.0 - g;
  r += g * ((leg_p_ - p_prev) / dt - 0.5 * (leg_rhs_ + rhs_prev));
  p_prev = leg_p_;
  rhs_prev = leg_rhs_;
  return solve(r);
}

}  // namespace mcoe
