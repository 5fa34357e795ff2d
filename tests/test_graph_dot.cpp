// autograd::to_dot / write_dot: the Graphviz picture of a computation graph.
#include <doctest/doctest.h>

#include <cctype>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "autograd/autograd.h"
#include "autograd/graph_dot.h"
#include "nn/nn.h"

using namespace autograd;

namespace {

int count(const std::string& text, const std::string& what) {
    int n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) n++;
    return n;
}

// Node declarations (`  n3 [label=...]`), not edges (`  n0 -> n3 [label="0"]`).
int node_count(const std::string& dot) {
    std::istringstream is(dot);
    int n = 0;
    for (std::string line; std::getline(is, line);)
        n += line.size() > 3 && line.rfind("  n", 0) == 0 && std::isdigit(static_cast<unsigned char>(line[3])) &&
             line.find(" -> ") == std::string::npos;
    return n;
}

// The line that declares node `id`, e.g. `  n3 [label="matmul\n(2, 4)", shape=ellipse];`
std::string node_line(const std::string& dot, int id) {
    std::istringstream is(dot);
    const std::string head = "  n" + std::to_string(id) + " [";
    for (std::string line; std::getline(is, line);)
        if (line.rfind(head, 0) == 0) return line;
    return "";
}

}  // namespace

TEST_CASE("to_dot draws y = relu(x W + b): nodes, op labels, shapes, edges") {
    Tensor x = Tensor::ones({2, 3});                            // data: no grad
    Tensor W = Tensor::ones({3, 4}).requires_grad_();           // parameters
    Tensor b = Tensor::zeros({4}).requires_grad_();
    Tensor y = relu(matmul(x, W) + b);                          // (2, 4)
    const std::string dot = to_dot(y);

    CHECK(dot.rfind("digraph", 0) == 0);
    CHECK(dot.back() == '\n');
    CHECK(node_count(dot) == 6);                          // x, W, matmul, b, add, relu
    CHECK(count(dot, " -> ") == 5);
    // computation order: inputs first, the root last (and drawn with a double outline)
    CHECK(node_line(dot, 0).find("constant\\n(2, 3)") != std::string::npos);
    CHECK(node_line(dot, 0).find("dashed") != std::string::npos);
    CHECK(node_line(dot, 1).find("parameter\\n(3, 4)") != std::string::npos);
    CHECK(node_line(dot, 1).find("filled") != std::string::npos);
    CHECK(node_line(dot, 2).find("matmul\\n(2, 4)") != std::string::npos);
    CHECK(node_line(dot, 3).find("parameter\\n(4,)") != std::string::npos);
    CHECK(node_line(dot, 4).find("add\\n(2, 4)") != std::string::npos);
    CHECK(node_line(dot, 5).find("relu\\n(2, 4)") != std::string::npos);
    CHECK(node_line(dot, 5).find("peripheries=2") != std::string::npos);
    CHECK(node_line(dot, 4).find("peripheries") == std::string::npos);
    CHECK(node_line(dot, 6).empty());
    // edges from inputs to outputs; an op with several inputs numbers them in argument order
    for (const char* e : {"n0 -> n2 [label=\"0\"];", "n1 -> n2 [label=\"1\"];", "n2 -> n4 [label=\"0\"];",
                          "n3 -> n4 [label=\"1\"];", "n4 -> n5;"})
        CHECK(dot.find(e) != std::string::npos);
}

TEST_CASE("to_dot is deterministic and does not depend on where nodes live in memory") {
    auto build = [] {
        Tensor a = Tensor::full({2, 2}, 0.5f).requires_grad_();
        Tensor b = Tensor::full({2, 2}, 2.0f).requires_grad_();
        Tensor c = a * b;
        return sum(c * c + exp(a));
    };
    const Tensor r1 = build();
    std::vector<Tensor> noise;                                   // shift the allocator between builds
    for (int i = 0; i < 7; i++) noise.push_back(Tensor::zeros({i + 1}));
    const Tensor r2 = build();
    CHECK(to_dot(r1) == to_dot(r2));
    CHECK(to_dot(r1) == to_dot(r1));
}

TEST_CASE("to_dot: a tensor used twice is one node with two edges; names label leaves") {
    Tensor x = Tensor::scalar(3.0f).requires_grad_();
    Tensor y = x * x;                                            // mul with the same parent twice
    const std::string dot = to_dot(y, {{"x", x}});
    CHECK(node_count(dot) == 2);
    CHECK(dot.find("n0 -> n1 [label=\"0\"];\n  n0 -> n1 [label=\"1\"];") != std::string::npos);
    CHECK(node_line(dot, 0).find("label=\"x\\n()\"") != std::string::npos);
    CHECK(node_line(dot, 1).find("mul\\n()") != std::string::npos);
}

TEST_CASE("to_dot of a multi-head attention layer names its parameters") {
    manual_seed(0);
    nn::MultiHeadAttention mha(8, 2, 0.0f);
    const Tensor x = Tensor::randn({1, 3, 8});
    const Tensor y = mha.forward(x, x, x);
    DotNames names = mha.named_parameters();
    names.push_back({"x", x});
    const std::string dot = to_dot(y, names);
    // x, 4 x (weight, bias), 4 linear outputs, attention
    CHECK(node_count(dot) == 1 + 8 + 4 + 1);
    CHECK(count(dot, "linear\\n(1, 3, 8)") == 4);
    CHECK(count(dot, "attention\\n(1, 3, 8)") == 1);
    CHECK(dot.find("w_q.weight\\n(8, 8)") != std::string::npos);
    CHECK(dot.find("w_o.bias\\n(8,)") != std::string::npos);
    CHECK(count(dot, "\"x\\n(1, 3, 8)\"") == 1);                 // q, k and v all read the one x
}

TEST_CASE("to_dot refuses a graph that backward() has freed, and an undefined tensor") {
    Tensor w = Tensor::ones({2}).requires_grad_();
    Tensor loss = sum(w * w);
    CHECK(node_count(to_dot(loss)) == 3);
    loss.backward();
    CHECK_THROWS_WITH_AS(to_dot(loss), doctest::Contains("before calling backward()"), std::logic_error);
    CHECK_THROWS_AS(to_dot(Tensor()), std::invalid_argument);
}

TEST_CASE("to_dot without a recorded graph is one node") {
    Tensor w = Tensor::ones({2, 2}).requires_grad_();
    Tensor y;
    {
        NoGradGuard no_grad;
        y = matmul(w, w);
    }
    const std::string dot = to_dot(y);
    CHECK(node_count(dot) == 1);
    CHECK(dot.find("matmul (no graph)\\n(2, 2)") != std::string::npos);
}

TEST_CASE("to_dot walks a 100,000-op chain without recursion") {
    Tensor x = Tensor::scalar(1.0f).requires_grad_();
    Tensor y = x;
    for (int i = 0; i < 100000; i++) y = y * 1.0f;
    CHECK(count(to_dot(y), "mul_scalar") == 100000);
}

TEST_CASE("write_dot writes the file, and names the path it cannot write") {
    Tensor a = Tensor::ones({3}).requires_grad_();
    const Tensor y = exp(a);
    const std::string path = "test_graph_dot.tmp";
    write_dot(y, path);
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    CHECK(ss.str() == to_dot(y));
    std::remove(path.c_str());
    CHECK_THROWS_WITH_AS(write_dot(y, "no/such/dir/g.dot"), doctest::Contains("no/such/dir/g.dot"), std::runtime_error);
}
