//===- LoopOps.cpp - the Loop nn.EmbeddingBag exports -> nn --------------===//
//
// torch.onnx exports nn.EmbeddingBag(mode sum / mean / max, with offsets)
// as a Loop over the bags: iteration b gathers the table's rows at
// indices[offsets[b] : offsets[b + 1]] (the last bag to the end) and
// reduces them over axis 0. Bag sizes depend on the data, so the loop
// cannot be unrolled; it is a segment reduction, lowered to ops that
// autodiff already differentiates:
//   member[b, j] = (j >= offsets[b]) - (j >= offsets[b + 1])   (0 or 1)
//   sum:  member @ table[indices]            (the gradient scatters back
//                                             through matmul and gather)
//   mean: sum / max(bag size, 1)             (an empty bag is 0, as PyTorch)
//   max:  max over j of (member ? row j : -inf), 0 for an empty bag.
// Any other Loop is an error that says what dsc recognises.
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/Composer.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

#include <cmath>
#include <limits>

using namespace mlir;

namespace dsc::onnx_import {
namespace {

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

const onnx::NodeProto *producerIn(const onnx::GraphProto &g, const std::string &name) {
  for (const auto &n : g.node())
    for (const auto &o : n.output())
      if (o == name)
        return &n;
  return nullptr;
}

/// The EmbeddingBag pattern of a Loop body, by value names.
struct Bag {
  std::string table, indices, starts;
  std::string mode; // "sum", "mean", "max"
};

/// Follows `name` through Unsqueeze to Gather(OUTER, iteration): OUTER.
std::optional<std::string> perBag(const onnx::GraphProto &body, const std::string &name,
                                  const std::string &iter) {
  const onnx::NodeProto *u = producerIn(body, name);
  if (!u || u->op_type() != "Unsqueeze" || u->input_size() < 1)
    return std::nullopt;
  const onnx::NodeProto *gth = producerIn(body, u->input(0));
  if (!gth || gth->op_type() != "Gather" || gth->input_size() != 2 || gth->input(1) != iter)
    return std::nullopt;
  return gth->input(0);
}

std::optional<Bag> recognise(const onnx::NodeProto &loop, const onnx::GraphProto &body) {
  if (body.input_size() < 2 || body.output_size() != 2 || loop.output_size() != 1)
    return std::nullopt;
  const std::string &iter = body.input(0).name();
  const onnx::NodeProto *reduce = producerIn(body, body.output(1).name());
  if (!reduce)
    return std::nullopt;
  Bag bag;
  const std::string &op = reduce->op_type();
  bag.mode = op == "ReduceSum" ? "sum" : op == "ReduceMean" ? "mean" : op == "ReduceMax" ? "max" : "";
  if (bag.mode.empty() || attrInt(*reduce, "keepdims", 1) != 0)
    return std::nullopt;
  const onnx::NodeProto *gather = producerIn(body, reduce->input(0));
  if (!gather || gather->op_type() != "Gather" || attrInt(*gather, "axis", 0) != 0)
    return std::nullopt;
  const onnx::NodeProto *slice = producerIn(body, gather->input(1));
  if (!slice || slice->op_type() != "Slice" || slice->input_size() < 3)
    return std::nullopt;
  auto starts = perBag(body, slice->input(1), iter);
  auto ends = perBag(body, slice->input(2), iter);
  if (!starts || !ends || producerIn(body, gather->input(0)) ||
      producerIn(body, slice->input(0)))
    return std::nullopt;
  bag.table = gather->input(0);
  bag.indices = slice->input(0);
  bag.starts = *starts;
  return bag;
}

LogicalResult loop(GraphImporter &g) {
  const onnx::AttributeProto *b = findAttr(g.node(), "body");
  auto refuse = [&](const Twine &what) {
    return g.fail("Loop is supported only as torch.onnx exports nn.EmbeddingBag (a Gather of "
                  "a table at the indices between consecutive offsets, then ReduceSum, "
                  "ReduceMean or ReduceMax over the rows); " + what +
                  ". Other loops need a fixed trip count unrolled at export "
                  "(a Python loop in forward) to train with dsc");
  };
  if (!b || b->type() != onnx::AttributeProto::GRAPH)
    return refuse("this node has no body graph");
  auto bag = recognise(g.node(), b->g());
  if (!bag)
    return refuse("this Loop's body is another computation");
  // The starts are Concat(offsets, [len(indices)]): the bags' offsets.
  const onnx::NodeProto *cat = g.producerOf(bag->starts);
  if (!cat || cat->op_type() != "Concat" || cat->input_size() != 2)
    return refuse("its bag starts do not come from Concat(offsets, [number of indices])");
  Value table = g.valueNamed(bag->table), indices = g.valueNamed(bag->indices),
        offsets = g.valueNamed(cat->input(0));
  if (!table || !indices || !offsets)
    return failure();
  auto tt = typeOf(table), it = typeOf(indices), ot = typeOf(offsets);
  if (!tt.getElementType().isF32() || tt.getRank() != 2)
    return g.fail("the bag table must be a float32 [rows, dim], is " +
                  nn::formatShape(tt.getShape()));
  if (it.getRank() != 1 || ot.getRank() != 1 || !it.getElementType().isInteger(64) ||
      !ot.getElementType().isInteger(64))
    return g.fail("the bag indices and offsets must be 1-D int64 (nn.EmbeddingBag's 1-D input "
                  "with offsets), are " + nn::formatShape(it.getShape()) + " and " +
                  nn::formatShape(ot.getShape()));
  const int64_t n = it.getDimSize(0), bags = ot.getDimSize(0), dim = tt.getDimSize(1);
  if (bags < 1)
    return g.fail("there must be at least one bag");
  Composer c(g);
  auto &bld = g.builder();
  Type f32 = tt.getElementType();
  // position[0, j] = j, against offsets[b, 0]: member[b, j] = (j >= off[b]).
  Value position = c.positions(n, 2, 1);
  Value from = c.cmp(nn::CmpPredicate::ge, position, c.reshape(offsets, {bags, 1}));
  Value after = c.made<nn::CastOp>(RankedTensorType::get({bags, n}, f32), {from});
  // Bag b ends where bag b + 1 starts; the last at the end.
  Value next = after;
  if (c.ok()) {
    Value zero = g.splat(RankedTensorType::get({1, n}, f32), 0.0);
    next = bags > 1 ? c.concat({c.sliceAxis(after, 0, 1, bags), zero}, 0) : zero;
  }
  Value member = c.op<nn::SubOp>({after, next});
  Value rows = c.op<nn::GatherOp>({table, indices},
                                  {g.attr("axis", bld.getI64IntegerAttr(0))});
  Value out;
  if (bag->mode == "max") {
    // PyTorch sends each maximum's gradient to one index; a token repeated
    // in a bag is the same table row twice, which nn.reduce_max's rule
    // (every equal maximum) would count twice: only a token's first
    // occurrence in its bag takes part. earlier[j', j] = idx[j'] == idx[j]
    // and j' < j; member @ earlier counts j's earlier copies in the bag.
    SmallVector<float> below(n * n, 0.0f);
    for (int64_t a = 0; a < n; ++a)
      for (int64_t j = a + 1; j < n; ++j)
        below[a * n + j] = 1.0f;
    auto nn2 = RankedTensorType::get({n, n}, f32);
    Value triangle =
        arith::ConstantOp::create(bld, g.loc(), DenseElementsAttr::get(nn2, ArrayRef<float>(below)));
    Value column = c.reshape(indices, {n, 1});
    Value row = c.reshape(indices, {1, n});
    Value same = c.made<nn::CastOp>(nn2, {c.cmp(nn::CmpPredicate::eq, column, row)});
    Value copies = c.op<nn::MatmulOp>({member, c.op<nn::MulOp>({same, triangle})});
    Value first = c.made<nn::CastOp>(
        RankedTensorType::get({bags, n}, f32),
        {c.cmp(nn::CmpPredicate::lt, copies, c.scalar(0.5, copies))});
    // [bags, n, dim]: row j where it is a first member, -inf elsewhere.
    Value m3 = c.reshape(c.op<nn::MulOp>({member, first}), {bags, n, 1});
    Value in = c.cmp(nn::CmpPredicate::gt, m3, c.scalar(0.5, m3));
    Value lowest = c.scalar(-std::numeric_limits<double>::infinity(), rows);
    Value picked = c.op<nn::SelectOp>({in, c.reshape(rows, {1, n, dim}), lowest});
    Value mx = c.reduce<nn::ReduceMaxOp>(picked, {1}, false);
    Value count = c.reduce<nn::ReduceSumOp>(member, {1}, true);
    Value some = c.cmp(nn::CmpPredicate::gt, count, c.scalar(0.5, count));
    out = c.op<nn::SelectOp>({some, mx, c.scalar(0.0, rows)});
  } else {
    out = c.op<nn::MatmulOp>({member, rows});
    if (bag->mode == "mean") {
      Value count = c.reduce<nn::ReduceSumOp>(member, {1}, true);
      out = c.op<nn::DivOp>({out, c.op<nn::MaxOp>({count, c.scalar(1.0, count)})});
    }
  }
  return c.finish(out);
}

} // namespace

void registerLoopConverters(ConverterTable &t) { t["Loop"] = loop; }

} // namespace dsc::onnx_import
