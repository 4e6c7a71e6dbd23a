//===- DistDialect.cpp - ordered collectives and send/recv ---------------===//
#include "dialects/dist/DistDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace dsc::dist;

#include "dialects/dist/DistDialect.cpp.inc"
#include "dialects/dist/DistEnums.cpp.inc"
#define GET_ATTRDEF_CLASSES
#include "dialects/dist/DistAttrs.cpp.inc"

/// An i64 attribute in [low, high] on an op of kind `Where`, or an error.
template <typename Where>
static LogicalResult inRange(Operation *op, NamedAttribute attr, int64_t low, int64_t high,
                             const char *where) {
  auto i = dyn_cast<IntegerAttr>(attr.getValue());
  if (!isa<Where>(op) || !i || !i.getType().isSignlessInteger(64) || i.getInt() < low ||
      i.getInt() > high)
    return op->emitError("'") << attr.getName().getValue() << "' is " << where
                              << " attribute, an i64 in [" << low << ", " << high << "]; got "
                              << attr.getValue();
  return success();
}

LogicalResult DistDialect::verifyOperationAttribute(Operation *op, NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  constexpr int64_t kMany = int64_t(1) << 31;
  // dist.tp on an op is tensor-parallel's mark of its split ("column",
  // "row", "replicated"), left to that pass; on the module, the tp ranks.
  if (name == kTp && !isa<ModuleOp>(op))
    return success();
  if (name == kDp || name == kPp || name == kTp || name == kMicroBatches)
    return inRange<ModuleOp>(op, attr, 1, kMany, "a module");
  if (name == kZeroStage)
    return inRange<ModuleOp>(op, attr, 0, 3, "a module");
  if (name == kStage)
    return inRange<FunctionOpInterface>(op, attr, 0, kMany, "a function");
  if (name == kSchedule) {
    auto s = dyn_cast<StringAttr>(attr.getValue());
    if (!isa<ModuleOp>(op) || !s || (s.getValue() != "1f1b" && s.getValue() != "zb-h1"))
      return op->emitError("'") << name << "' is a module attribute, \"1f1b\" or \"zb-h1\"; "
                                << "got " << attr.getValue();
  }
  return success();
}

void DistDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/dist/DistOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/dist/DistAttrs.cpp.inc"
      >();
}

LogicalResult GroupAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                Axis, int64_t size) {
  if (size < 1)
    return emitError() << "group size must be at least 1, got " << size;
  return success();
}

static LogicalResult checkArity(Operation *op) {
  if (op->getNumOperands() != op->getNumResults())
    return op->emitOpError("has ") << op->getNumOperands() << " inputs but "
                                   << op->getNumResults() << " results";
  if (op->getNumOperands() == 0)
    return op->emitOpError("needs at least one input");
  return success();
}

/// An average of integers would silently truncate.
static LogicalResult checkReduceKind(Operation *op, ReduceKind kind, Value in) {
  if (kind == ReduceKind::avg &&
      !isa<FloatType>(cast<ShapedType>(in.getType()).getElementType()))
    return op->emitOpError("avg needs float tensors, got ") << in.getType();
  return success();
}

LogicalResult AllReduceOp::verify() {
  if (failed(checkArity(*this)))
    return failure();
  for (auto [in, out] : llvm::zip(getInputs(), getResults())) {
    if (in.getType() != out.getType())
      return emitOpError("result type ") << out.getType()
                                         << " differs from input type "
                                         << in.getType();
    if (failed(checkReduceKind(*this, getReduce(), in)))
      return failure();
  }
  return success();
}

/// Dimension 0 of `out` must be `in`'s times `factor` (gather) or divided
/// by it (scatter); all other dimensions and the element type are equal.
/// 1-D tensors may be padded: a scatter of n elements gives chunks of
/// ceil(n / size) (the input zero-padded to size chunks), and a gather of
/// chunks of c gives any n with ceil(n / size) = c (the padding dropped).
static LogicalResult checkDim0(Operation *op, Value in, Value out,
                               int64_t size, bool gather) {
  auto ti = cast<RankedTensorType>(in.getType());
  auto to = cast<RankedTensorType>(out.getType());
  if (ti.getRank() == 0)
    return op->emitOpError("inputs must have rank >= 1");
  if (ti.getElementType() != to.getElementType() || ti.getRank() != to.getRank() ||
      ti.getShape().drop_front() != to.getShape().drop_front())
    return op->emitOpError("result ") << to << " must match input " << ti
                                      << " outside dimension 0";
  int64_t d = ti.getDimSize(0), r = to.getDimSize(0);
  if (ti.getRank() == 1) {
    // n elements make `size` chunks of ceil(n / size).
    int64_t n = gather ? r : d, chunk = gather ? d : r;
    if ((n + size - 1) / size != chunk) {
      if (gather)
        return op->emitOpError("result length must be in (")
               << (chunk - 1) * size << ", " << chunk * size << "] to make " << size
               << " chunks of " << chunk << ", got " << r;
      return op->emitOpError("result length must be ")
             << (d + size - 1) / size << " for " << d << " elements in " << size
             << " chunks, got " << r;
    }
    return success();
  }
  if (!gather && d % size != 0)
    return op->emitOpError("dimension 0 of ")
           << ti << " is not divisible by the group size " << size
           << " (pad the buffer to a multiple of it)";
  int64_t expected = gather ? d * size : d / size;
  if (r != expected)
    return op->emitOpError("result dimension 0 must be ")
           << expected << ", got " << r;
  return success();
}

LogicalResult ReduceScatterOp::verify() {
  if (failed(checkArity(*this)))
    return failure();
  for (auto [in, out] : llvm::zip(getInputs(), getResults()))
    if (failed(checkReduceKind(*this, getReduce(), in)) ||
        failed(checkDim0(*this, in, out, getGroup().getSize(), false)))
      return failure();
  return success();
}

LogicalResult AllGatherOp::verify() {
  if (failed(checkArity(*this)))
    return failure();
  for (auto [in, out] : llvm::zip(getInputs(), getResults()))
    if (failed(checkDim0(*this, in, out, getGroup().getSize(), true)))
      return failure();
  return success();
}

LogicalResult AllToAllOp::verify() {
  if (failed(checkArity(*this)))
    return failure();
  for (auto [in, out] : llvm::zip(getInputs(), getResults())) {
    if (in.getType() != out.getType())
      return emitOpError("result type ") << out.getType() << " must equal the input type "
                                         << in.getType();
    auto t = cast<RankedTensorType>(in.getType());
    if (t.getRank() == 0)
      return emitOpError("inputs must have rank >= 1");
    if (t.getDimSize(0) % getGroup().getSize() != 0)
      return emitOpError("dimension 0 of ")
             << t << " is not " << getGroup().getSize()
             << " equal chunks (pad the buffer to a multiple of the group size)";
  }
  return success();
}

LogicalResult BroadcastOp::verify() {
  if ((int64_t)getRoot() < 0 || (int64_t)getRoot() >= getGroup().getSize())
    return emitOpError("root ") << (int64_t)getRoot() << " is outside the group of size "
                                << getGroup().getSize();
  if (getInput().getType() != getResult().getType())
    return emitOpError("result type must equal the input type");
  return success();
}

static LogicalResult checkPeer(Operation *op, GroupAttr group, int64_t peer,
                               int64_t tag) {
  if (peer == 0 || peer <= -group.getSize() || peer >= group.getSize())
    return op->emitOpError("peer offset ")
           << peer << " must be non-zero and within the group of size "
           << group.getSize();
  if (tag < 0)
    return op->emitOpError("tag must be non-negative, got ") << tag;
  return success();
}

LogicalResult SendOp::verify() {
  return checkPeer(*this, getGroup(), getPeer(), getTag());
}
LogicalResult RecvOp::verify() {
  return checkPeer(*this, getGroup(), getPeer(), getTag());
}

Operation *WaitOp::getCollective() {
  if (getInputs().empty())
    return nullptr;
  return getInputs().front().getDefiningOp();
}

LogicalResult WaitOp::inferReturnTypes(MLIRContext *, std::optional<Location>,
                                       ValueRange operands, DictionaryAttr,
                                       OpaqueProperties, RegionRange,
                                       SmallVectorImpl<Type> &types) {
  llvm::append_range(types, operands.getTypes());
  return success();
}

LogicalResult WaitOp::verify() {
  Operation *c = getCollective();
  if (!c || !isa<AllReduceOp, ReduceScatterOp, AllGatherOp, AllToAllOp, SendOp, RecvOp>(c))
    return emitOpError("operands must be the results of one all_reduce, "
                       "reduce_scatter, all_gather, all_to_all, send or recv");
  if (c->getBlock() != (*this)->getBlock())
    return emitOpError("must be in the block of its collective");
  if (getInputs().size() != c->getNumResults() ||
      !llvm::equal(getInputs(), c->getResults()))
    return emitOpError("must take every result of its collective, in order (")
           << c->getNumResults() << " results)";
  if (getInputs().getTypes() != getResults().getTypes())
    return emitOpError("result types must equal the operand types");
  return success();
}

LogicalResult ChunkOp::verify() {
  auto in = cast<RankedTensorType>(getInput().getType());
  auto out = cast<RankedTensorType>(getResult().getType());
  int64_t size = getGroup().getSize();
  if (in.getRank() != 1 || out.getRank() != 1)
    return emitOpError("input and result must be 1-D");
  if (in.getElementType() != out.getElementType())
    return emitOpError("result element type must equal the input's");
  int64_t chunk = (in.getDimSize(0) + size - 1) / size;
  if (out.getDimSize(0) != chunk)
    return emitOpError("result length must be ")
           << chunk << " (" << in.getDimSize(0) << " elements in " << size << " chunks)";
  return success();
}

#define GET_OP_CLASSES
#include "dialects/dist/DistOps.cpp.inc"

//===--- tensor parallelism -----------------------------------------------===//

static LogicalResult verifyTpGroup(Operation *op, GroupAttr group) {
  if (group.getAxis() != Axis::tp)
    return op->emitOpError("works on the tensor-parallel group, not the ")
           << stringifyAxis(group.getAxis()) << " group";
  return success();
}

LogicalResult TpCopyOp::verify() { return verifyTpGroup(*this, getGroup()); }
LogicalResult TpReduceOp::verify() { return verifyTpGroup(*this, getGroup()); }
LogicalResult TpMaxOp::verify() { return verifyTpGroup(*this, getGroup()); }

LogicalResult TpMaxOp::buildGradients(OpBuilder &, ArrayRef<Value>,
                                      SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign(1, Value());
  return success();
}

LogicalResult TpCopyOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                       SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign(1, resultGrads[0] ? TpReduceOp::create(b, getLoc(), resultGrads[0],
                                                             getGroup())
                                              .getResult()
                                        : Value());
  return success();
}

LogicalResult TpReduceOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                         SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign(1, resultGrads[0] ? TpCopyOp::create(b, getLoc(), resultGrads[0],
                                                           getGroup())
                                              .getResult()
                                        : Value());
  return success();
}

//===--- sequence parallelism ---------------------------------------------===//

/// `part` is `whole` with dimension `dim` cut into the group's parts, every
/// dimension before it 1 (so each part is contiguous).
static LogicalResult verifyTokenSplit(Operation *op, GroupAttr group, int64_t dim, Type wholeT,
                                      Type partT) {
  if (failed(verifyTpGroup(op, group)))
    return failure();
  auto whole = cast<RankedTensorType>(wholeT), part = cast<RankedTensorType>(partT);
  if (whole.getElementType() != part.getElementType())
    return op->emitOpError("result element type must equal the input's");
  if (whole.getRank() != part.getRank() || dim < 0 || dim >= whole.getRank())
    return op->emitOpError("dim ") << dim << " must be a dimension of both (ranks "
                                    << whole.getRank() << " and " << part.getRank() << ")";
  for (int64_t i = 0; i < whole.getRank(); ++i) {
    int64_t want = i == dim ? whole.getDimSize(i) / group.getSize() : whole.getDimSize(i);
    if (i < dim && whole.getDimSize(i) != 1)
      return op->emitOpError("every dimension before dim ")
             << dim << " must be 1 (a part must be contiguous), dimension " << i << " is "
             << whole.getDimSize(i);
    if (i == dim && whole.getDimSize(i) % group.getSize())
      return op->emitOpError("dimension ") << dim << " of size " << whole.getDimSize(i)
                                           << " does not split into " << group.getSize()
                                           << " parts";
    if (part.getDimSize(i) != want)
      return op->emitOpError("the part must be ")
             << whole << " with dimension " << dim << " cut into " << group.getSize()
             << " parts, not " << part;
  }
  return success();
}

LogicalResult SpGatherOp::verify() {
  return verifyTokenSplit(*this, getGroup(), getDim(), getResult().getType(),
                          getInput().getType());
}
LogicalResult SpScatterOp::verify() {
  return verifyTokenSplit(*this, getGroup(), getDim(), getInput().getType(),
                          getResult().getType());
}

LogicalResult SpGatherOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                         SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign(1, resultGrads[0]
                             ? SpScatterOp::create(b, getLoc(), getInput().getType(),
                                                   resultGrads[0], getGroup(), getDimAttr(),
                                                   getReduceAttr())
                                   .getResult()
                             : Value());
  return success();
}

LogicalResult SpScatterOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                          SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign(1, resultGrads[0]
                             ? SpGatherOp::create(b, getLoc(), getInput().getType(),
                                                  resultGrads[0], getGroup(), getDimAttr(),
                                                  getReduceAttr())
                                   .getResult()
                             : Value());
  return success();
}
